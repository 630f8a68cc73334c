package dev.idempotency.spring;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.InputStream;
import java.io.OutputStream;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.jar.Attributes;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;
import java.util.jar.Manifest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.http.MediaType;
import org.springframework.samples.idempotencyprobe.PetType;
import org.springframework.util.MimeType;

/**
 * How the key conversion's frames rule tells Spring's own classes outside the packages a conversion
 * runs through: by the jar they came from ({@link ExpressionAttributes#fromSpringsOwnJar}: the
 * manifest's title its class loader read), not by their package. The end-to-end rows are
 * KeyConversionBadInputEndpointProbeTest and RabbitKeyConversionBadInputProbeTest (spring-web's
 * MediaType: Spring's) and KeyConversionFramesEndpointProbeTest (a class under
 * org.springframework.samples: the application's); here the same class under
 * org.springframework.samples is loaded from jars of its own, as a packaged application's or a
 * Spring jar's would be.
 */
class ExpressionAttributesSpringsJarTest {

  private static final String PET_TYPE = PetType.class.getName().replace('.', '/') + ".class";

  @TempDir Path dir;

  @Test
  void springsJarsAreSpringsAndAnApplicationsClassesUnderOrgSpringframeworkAreNot() {
    assertThat(ExpressionAttributes.fromSpringsOwnJar(MediaType.class)).as("spring-web").isTrue();
    assertThat(ExpressionAttributes.fromSpringsOwnJar(MimeType.class)).as("spring-core").isTrue();
    assertThat(ExpressionAttributes.fromSpringsOwnJar(PetType.class))
        .as("org.springframework.samples, compiled into a directory")
        .isFalse();
    assertThat(ExpressionAttributes.fromSpringsOwnJar(Test.class))
        .as("a library's jar (JUnit's)")
        .isFalse();
  }

  @Test
  void aClassFromAJarTitledAsSpringsIsSprings() throws Exception {
    assertThat(fromJar("spring-idempotencyprobe.jar", "spring-idempotencyprobe"))
        .as("spring-…, as Spring Framework's jars")
        .isTrue();
    assertThat(fromJar("spring-boot-idempotencyprobe.jar", "Spring Boot"))
        .as("Spring …, as Spring Boot's and Spring Data's jars")
        .isTrue();
  }

  @Test
  void aClassFromAJarOfTheApplicationsIsNotSprings() throws Exception {
    assertThat(fromJar("petclinic.jar", "petclinic")).as("another title").isFalse();
    assertThat(fromJar("untitled.jar", null)).as("no title").isFalse();
  }

  /**
   * Whether PetType, loaded from a jar of its own (with that title in its manifest, or none) by a
   * class loader that does not see the test's classes, is taken for Spring's.
   */
  private boolean fromJar(String name, String title) throws Exception {
    Manifest manifest = new Manifest();
    manifest.getMainAttributes().put(Attributes.Name.MANIFEST_VERSION, "1.0");
    if (title != null) {
      manifest.getMainAttributes().put(Attributes.Name.IMPLEMENTATION_TITLE, title);
    }
    Path jar = dir.resolve(name);
    try (OutputStream out = Files.newOutputStream(jar);
        JarOutputStream entries = new JarOutputStream(out, manifest);
        InputStream bytes = PetType.class.getClassLoader().getResourceAsStream(PET_TYPE)) {
      entries.putNextEntry(new JarEntry(PET_TYPE));
      bytes.transferTo(entries);
      entries.closeEntry();
    }
    try (URLClassLoader loader =
        new URLClassLoader(new URL[] {jar.toUri().toURL()}, ClassLoader.getPlatformClassLoader())) {
      Class<?> type = Class.forName(PetType.class.getName(), false, loader);
      assertThat(type).as("loaded from the jar").isNotSameAs(PetType.class);
      return ExpressionAttributes.fromSpringsOwnJar(type);
    }
  }
}
