package dev.idempotency.releasecheck;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.jar.JarFile;
import java.util.stream.Stream;
import javax.xml.parsers.DocumentBuilderFactory;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import org.w3c.dom.Document;
import org.w3c.dom.Element;
import org.w3c.dom.Node;
import org.w3c.dom.NodeList;

/**
 * What a release would publish, as {@code mvn verify} staged it in {@code target/staging}: every
 * published module with a flattened POM carrying Central's metadata and no dependency beyond its
 * allowance, a jar with its module name, a sources jar and a javadoc jar; and a BOM of exactly
 * those modules.
 */
class StagedArtifactsTest {

  private static final Path STAGING = Path.of(System.getProperty("staging.directory"));
  private static final String VERSION = System.getProperty("project.version");
  private static final String GROUP = "dev.idempotency";

  /**
   * Each published jar module: its module name, and the dependencies its POM may declare (beyond
   * our own published modules), as groupId:artifactId, with whether each may only be optional or
   * provided.
   */
  private static final Map<String, Published> PUBLISHED = new TreeMap<>();

  static {
    PUBLISHED.put(
        "idempotency-core",
        new Published(
            "dev.idempotency.core",
            Set.of("org.slf4j:slf4j-api", "com.github.ben-manes.caffeine:caffeine"),
            Set.of()));
    PUBLISHED.put(
        "idempotency-store-tck",
        new Published(
            "dev.idempotency.tck",
            Set.of("org.junit.jupiter:junit-jupiter-api", "org.assertj:assertj-core"),
            Set.of()));
    PUBLISHED.put(
        "idempotency-jdbc",
        new Published(
            "dev.idempotency.jdbc", Set.of("org.jdbi:jdbi3-core"), Set.of("com.zaxxer:HikariCP")));
    PUBLISHED.put(
        "idempotency-redis",
        new Published("dev.idempotency.redis", Set.of("io.lettuce:lettuce-core"), Set.of()));
    PUBLISHED.put(
        "idempotency-dynamodb",
        new Published(
            "dev.idempotency.dynamodb", Set.of("software.amazon.awssdk:dynamodb"), Set.of()));
    PUBLISHED.put(
        "idempotency-micrometer",
        new Published(
            "dev.idempotency.micrometer", Set.of("io.micrometer:micrometer-core"), Set.of()));
    PUBLISHED.put(
        "idempotency-spring-boot-starter",
        new Published(
            "dev.idempotency.spring",
            Set.of("org.springframework.boot:spring-boot-autoconfigure"),
            Set.of(
                "io.micrometer:micrometer-core",
                "org.springframework:spring-webmvc",
                "org.springframework:spring-webflux",
                "io.projectreactor:reactor-core",
                "io.projectreactor.netty:reactor-netty-core",
                "org.springframework:spring-jdbc",
                "jakarta.servlet:jakarta.servlet-api",
                "org.springframework.data:spring-data-redis",
                "io.lettuce:lettuce-core",
                "com.fasterxml.jackson.core:jackson-databind",
                "tools.jackson.core:jackson-databind",
                "org.springframework.kafka:spring-kafka",
                "org.springframework.amqp:spring-rabbit",
                "org.springframework:spring-jms",
                "jakarta.jms:jakarta.jms-api",
                "org.springframework.boot:spring-boot-actuator-autoconfigure",
                "org.springframework.boot:spring-boot-health")));
  }

  record Published(String moduleName, Set<String> required, Set<String> optionalOnly) {}

  static Stream<String> publishedJars() {
    return PUBLISHED.keySet().stream();
  }

  @ParameterizedTest
  @MethodSource("publishedJars")
  void theJarHasItsModuleNameAndSourcesAndJavadocBesideIt(String artifactId) throws Exception {
    Staged staged = staged(artifactId);

    try (JarFile jar = new JarFile(staged.file("jar").toFile())) {
      assertThat(jar.getManifest().getMainAttributes().getValue("Automatic-Module-Name"))
          .isEqualTo(PUBLISHED.get(artifactId).moduleName());
      assertThat(jar.stream().filter(e -> e.getName().endsWith(".class"))).isNotEmpty();
    }
    try (JarFile sources = new JarFile(staged.file("sources.jar").toFile())) {
      assertThat(sources.stream().filter(e -> e.getName().endsWith(".java"))).isNotEmpty();
    }
    try (JarFile javadoc = new JarFile(staged.file("javadoc.jar").toFile())) {
      assertThat(javadoc.getEntry("index.html")).isNotNull();
    }
  }

  @ParameterizedTest
  @MethodSource("publishedJars")
  void thePomIsSelfContainedWithCentralsMetadataAndOnlyAllowedDependencies(String artifactId)
      throws Exception {
    Document pom = staged(artifactId).pom();
    Element project = pom.getDocumentElement();

    assertCentralMetadata(project);
    List<String> problems = new ArrayList<>();
    Published allowance = PUBLISHED.get(artifactId);
    for (Element dependency : children(child(project, "dependencies"), "dependency")) {
      String ga = text(dependency, "groupId") + ":" + text(dependency, "artifactId");
      String scope = text(dependency, "scope");
      String version = text(dependency, "version");
      boolean optional = "true".equals(text(dependency, "optional")) || "provided".equals(scope);
      if ("test".equals(scope)) {
        problems.add(ga + " is a test dependency");
      } else if (ga.startsWith(GROUP + ":")) {
        if (!PUBLISHED.containsKey(ga.substring(GROUP.length() + 1))) {
          problems.add(ga + " is not a published module");
        } else if (!VERSION.equals(version)) {
          problems.add(ga + " has version " + version + ", not " + VERSION);
        }
      } else if (allowance.required().contains(ga)) {
        if (version.contains("SNAPSHOT")) {
          problems.add(ga + " is a SNAPSHOT");
        }
      } else if (allowance.optionalOnly().contains(ga) || ga.equals("org.jspecify:jspecify")) {
        if (!optional) {
          problems.add(ga + " must be optional or provided");
        }
      } else {
        problems.add(ga + " (" + scope + ") is not in the module's allowance");
      }
    }
    assertThat(problems).as("dependencies of " + artifactId).isEmpty();
  }

  @Test
  void theBomManagesExactlyThePublishedModulesAtThisVersion() throws Exception {
    Element project = staged("idempotency-bom").pom().getDocumentElement();

    assertCentralMetadata(project);
    assertThat(text(project, "packaging")).isEqualTo("pom");
    assertThat(child(project, "dependencies")).isNull();
    Map<String, String> managed = new TreeMap<>();
    for (Element dependency :
        children(child(child(project, "dependencyManagement"), "dependencies"), "dependency")) {
      managed.put(
          text(dependency, "groupId") + ":" + text(dependency, "artifactId"),
          text(dependency, "version"));
    }
    assertThat(text(project, "version")).isEqualTo(VERSION);
    // the BOM's own version, wherever it is imported
    Map<String, String> expected = new TreeMap<>();
    PUBLISHED
        .keySet()
        .forEach(artifactId -> expected.put(GROUP + ":" + artifactId, "${project.version}"));
    assertThat(managed).isEqualTo(expected);
  }

  @Test
  void nothingElseIsStaged() throws IOException {
    List<String> staged;
    try (Stream<Path> dirs = Files.list(STAGING.resolve(GROUP.replace('.', '/')))) {
      staged = dirs.map(dir -> dir.getFileName().toString()).sorted().toList();
    }
    List<String> expected = new ArrayList<>(PUBLISHED.keySet());
    expected.add("idempotency-bom");
    Collections.sort(expected);
    assertThat(staged).as("modules staged for publication").isEqualTo(expected);
  }

  private static void assertCentralMetadata(Element project) {
    assertThat(child(project, "parent")).as("a flattened POM has no parent").isNull();
    assertThat(text(project, "name")).isNotBlank();
    assertThat(text(project, "description")).isNotBlank();
    assertThat(text(project, "url")).startsWith("https://");
    assertThat(text(child(child(project, "licenses"), "license"), "name")).isNotBlank();
    Element scm = child(project, "scm");
    assertThat(text(scm, "url")).startsWith("https://");
    assertThat(text(scm, "connection")).startsWith("scm:git:");
    assertThat(text(child(child(project, "developers"), "developer"), "name")).isNotBlank();
    assertThat(child(project, "build")).as("no build section is published").isNull();
  }

  // ---- the staging repository

  /** One module's newest staged files: for a SNAPSHOT, the newest timestamped build. */
  private record Staged(Path directory, String baseName) {
    Path file(String suffix) {
      String name =
          suffix.equals("jar") || suffix.equals("pom")
              ? baseName + "." + suffix
              : baseName + "-" + suffix;
      Path file = directory.resolve(name);
      assertThat(file).as("staged " + name).isRegularFile();
      return file;
    }

    Document pom() throws Exception {
      var factory = DocumentBuilderFactory.newInstance();
      factory.setFeature("http://apache.org/xml/features/disallow-doctype-decl", true);
      return factory.newDocumentBuilder().parse(file("pom").toFile());
    }
  }

  private static Staged staged(String artifactId) throws Exception {
    Path directory = STAGING.resolve(GROUP.replace('.', '/')).resolve(artifactId).resolve(VERSION);
    assertThat(directory).as("staged " + artifactId).isDirectory();
    String fileVersion = VERSION;
    Path metadata = directory.resolve("maven-metadata.xml");
    if (VERSION.endsWith("-SNAPSHOT") && Files.exists(metadata)) {
      var factory = DocumentBuilderFactory.newInstance();
      factory.setFeature("http://apache.org/xml/features/disallow-doctype-decl", true);
      Element snapshot =
          child(
              child(
                  factory.newDocumentBuilder().parse(metadata.toFile()).getDocumentElement(),
                  "versioning"),
              "snapshot");
      fileVersion =
          VERSION.replace(
              "SNAPSHOT", text(snapshot, "timestamp") + "-" + text(snapshot, "buildNumber"));
    }
    String baseName = artifactId + "-" + fileVersion;
    return new Staged(directory, baseName);
  }

  private static Element child(Element parent, String name) {
    if (parent == null) {
      return null;
    }
    for (Node node = parent.getFirstChild(); node != null; node = node.getNextSibling()) {
      if (node instanceof Element element && element.getTagName().equals(name)) {
        return element;
      }
    }
    return null;
  }

  private static List<Element> children(Element parent, String name) {
    List<Element> found = new ArrayList<>();
    if (parent != null) {
      NodeList nodes = parent.getChildNodes();
      for (int i = 0; i < nodes.getLength(); i++) {
        if (nodes.item(i) instanceof Element element && element.getTagName().equals(name)) {
          found.add(element);
        }
      }
    }
    return found;
  }

  private static String text(Element parent, String name) {
    Element element = child(parent, name);
    return element == null ? null : element.getTextContent().trim();
  }
}
