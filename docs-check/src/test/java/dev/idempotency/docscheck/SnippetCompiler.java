package dev.idempotency.docscheck;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.tools.Diagnostic;
import javax.tools.DiagnosticCollector;
import javax.tools.JavaCompiler;
import javax.tools.JavaFileObject;
import javax.tools.SimpleJavaFileObject;
import javax.tools.StandardJavaFileManager;
import javax.tools.ToolProvider;

/**
 * Compiles the {@code ```java} blocks of the documentation with {@code javax.tools}, against the
 * classpath of this module's tests (every published module and the APIs the snippets use).
 *
 * <p>How a block is compiled (the convention is also described in this module's README.md):
 *
 * <ol>
 *   <li>A block that declares a top-level type ({@code class}, {@code interface}, {@code record},
 *       {@code enum}, at brace depth 0) is a <b>compilation unit</b>, compiled as it is, in a
 *       package of its own ({@code snippets.<page>.l<line>}) unless it names one.
 *   <li>Any other block is <b>statements</b>: its leading {@code import} lines stay imports, and
 *       the rest becomes the body of {@code void snippet() throws Throwable} in a generated class.
 *   <li>{@code <!-- snippet-kind: members -->} just above a block makes it <b>members</b> (methods
 *       with their annotations, fields): the body of the generated class.
 *   <li>{@code <!-- snippet-context: ... -->} just above a block (after or before the kind comment)
 *       declares what the block uses without showing it: its {@code import} lines are added to the
 *       imports, and the rest is added to the generated class as members (for statements and
 *       members: {@code String userId; SmsClient sms;}) or to the compilation unit as top-level
 *       types (for a unit: {@code interface SmsClient { ... }}).
 *   <li>{@code <!-- snippet-kind: not-compiled: <reason> -->} keeps a block out, with a reason. The
 *       test lists every such block and fails when the list changes, so no block is skipped
 *       silently.
 * </ol>
 *
 * <p>All blocks are compiled in one compiler run; each error is reported as {@code page:line} (the
 * line in the Markdown page) with the compiler's message and the offending line.
 */
final class SnippetCompiler {

  private static final Pattern IMPORT =
      Pattern.compile("^\\s*import\\s+(static\\s+)?[\\w.]+(\\.\\*)?\\s*;\\s*(//.*)?$");
  private static final Pattern PACKAGE = Pattern.compile("^\\s*package\\s+[\\w.]+\\s*;.*$");
  private static final Pattern TYPE_DECLARATION =
      Pattern.compile(
          "^\\s*(?:@\\w+(?:\\([^)]*\\))?\\s+)*(?:(?:public|protected|private|abstract|final|static|sealed|non-sealed|strictfp)\\s+)*(class|interface|record|enum|@interface)\\s+(\\w+).*");

  /** A generated source line and the page line it comes from (0: the wrapper). */
  private record Line(String text, int pageLine) {}

  /** A generated source file and where its lines come from. */
  private static final class Source extends SimpleJavaFileObject {
    final Snippet snippet;
    final List<Line> lines;

    Source(String path, Snippet snippet, List<Line> lines) {
      super(URI.create("string:///" + path), Kind.SOURCE);
      this.snippet = snippet;
      this.lines = lines;
    }

    @Override
    public CharSequence getCharContent(boolean ignoreEncodingErrors) {
      StringBuilder text = new StringBuilder();
      for (Line line : lines) {
        text.append(line.text()).append('\n');
      }
      return text;
    }
  }

  /** What one compiler run found: one message per error, naming page and line. */
  record Result(int compiled, List<String> errors) {}

  /** Compiles every block not marked not-compiled; returns the errors. */
  Result compile(List<Snippet> snippets) {
    List<Source> sources = new ArrayList<>();
    for (Snippet snippet : snippets) {
      if (snippet.kind() != Snippet.Kind.NOT_COMPILED) {
        sources.add(generate(snippet));
      }
    }
    if (sources.isEmpty()) {
      return new Result(0, List.of());
    }
    JavaCompiler compiler = ToolProvider.getSystemJavaCompiler();
    DiagnosticCollector<JavaFileObject> diagnostics = new DiagnosticCollector<>();
    Path output;
    try {
      output = Files.createTempDirectory("docs-check");
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    List<String> options =
        List.of(
            "-classpath",
            classpath(),
            "-d",
            output.toString(),
            "--release",
            "17",
            "-proc:none",
            // report type errors too when another block has a syntax error
            "-XDshould-stop.ifError=FLOW",
            "-nowarn",
            "-Xmaxerrs",
            "1000",
            "-encoding",
            "UTF-8");
    try (StandardJavaFileManager files =
        compiler.getStandardFileManager(diagnostics, Locale.ROOT, null)) {
      compiler.getTask(null, files, diagnostics, options, null, sources).call();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    List<String> errors = new ArrayList<>();
    Map<JavaFileObject, Source> bySource = new IdentityHashMap<>();
    sources.forEach(s -> bySource.put(s, s));
    for (Diagnostic<? extends JavaFileObject> diagnostic : diagnostics.getDiagnostics()) {
      if (diagnostic.getKind() != Diagnostic.Kind.ERROR) {
        continue;
      }
      errors.add(describe(diagnostic, bySource.get(diagnostic.getSource())));
    }
    return new Result(sources.size(), errors);
  }

  private static String describe(Diagnostic<? extends JavaFileObject> diagnostic, Source source) {
    String message = diagnostic.getMessage(Locale.ROOT);
    if (source == null) {
      return "(no snippet): " + message;
    }
    long index = diagnostic.getLineNumber() - 1;
    Line line = index >= 0 && index < source.lines.size() ? source.lines.get((int) index) : null;
    int pageLine =
        line == null || line.pageLine() == 0 ? source.snippet.fenceLine() : line.pageLine();
    String where =
        line != null && line.pageLine() == 0 ? " (in the code generated around the block)" : "";
    return source.snippet.page()
        + ":"
        + pageLine
        + ": error"
        + where
        + ": "
        + message
        + (line == null ? "" : "\n    " + line.text().strip());
  }

  /** The generated source of one block. */
  private static Source generate(Snippet snippet) {
    String pkg = packageOf(snippet);
    List<Line> imports = new ArrayList<>();
    List<Line> body = new ArrayList<>();
    boolean leading = true;
    boolean hasPackage = false;
    String publicType = null;
    boolean declaresType = false;
    int depth = 0;
    for (int i = 0; i < snippet.lines().size(); i++) {
      String text = snippet.lines().get(i);
      Line line = new Line(text, snippet.pageLine(i));
      if (depth == 0) {
        Matcher type = TYPE_DECLARATION.matcher(text);
        if (type.matches()) {
          declaresType = true;
          if (publicType == null && text.strip().startsWith("public")) {
            publicType = type.group(2);
          }
        }
        hasPackage |= PACKAGE.matcher(text).matches();
      }
      if (leading && IMPORT.matcher(text).matches()) {
        imports.add(line);
      } else {
        if (!text.isBlank() && !text.strip().startsWith("//")) {
          leading = false;
        }
        body.add(line);
      }
      depth += braceDelta(text);
    }
    List<Line> contextImports = new ArrayList<>();
    List<Line> contextMembers = new ArrayList<>();
    for (int i = 0; i < snippet.context().size(); i++) {
      String text = snippet.context().get(i);
      Line line = new Line(text, snippet.contextLine() + i);
      (IMPORT.matcher(text).matches() ? contextImports : contextMembers).add(line);
    }

    Snippet.Kind kind = snippet.kind();
    if (kind == Snippet.Kind.AUTO) {
      kind = declaresType ? Snippet.Kind.UNIT : Snippet.Kind.STATEMENTS;
    }
    List<Line> lines = new ArrayList<>();
    String fileName = "Snippet";
    if (kind == Snippet.Kind.UNIT) {
      if (hasPackage) {
        // the block's own package line must come first: put the context imports after it
        boolean placed = false;
        for (Line line : concat(imports, body)) {
          lines.add(line);
          if (!placed && PACKAGE.matcher(line.text()).matches()) {
            lines.addAll(contextImports);
            placed = true;
          }
        }
      } else {
        lines.add(new Line("package " + pkg + ";", 0));
        lines.addAll(contextImports);
        lines.addAll(imports);
        lines.addAll(body);
      }
      lines.addAll(contextMembers);
      if (publicType != null) {
        fileName = publicType;
      }
    } else {
      lines.add(new Line("package " + pkg + ";", 0));
      lines.addAll(contextImports);
      lines.addAll(imports);
      lines.add(new Line("@SuppressWarnings(\"all\") class Snippet {", 0));
      lines.addAll(contextMembers);
      if (kind == Snippet.Kind.STATEMENTS) {
        lines.add(new Line("void snippet() throws Throwable {", 0));
        lines.addAll(body);
        lines.add(new Line("}", 0));
      } else {
        lines.addAll(body);
      }
      lines.add(new Line("}", 0));
    }
    return new Source(pkg.replace('.', '/') + "/" + fileName + ".java", snippet, lines);
  }

  private static List<Line> concat(List<Line> a, List<Line> b) {
    List<Line> all = new ArrayList<>(a);
    all.addAll(b);
    return all;
  }

  /** A package per block, from its page and line: {@code snippets.docs_stores_md.l120}. */
  static String packageOf(Snippet snippet) {
    String page = snippet.page().toLowerCase(Locale.ROOT).replaceAll("[^a-z0-9]", "_");
    return "snippets."
        + (Character.isDigit(page.charAt(0)) ? "_" + page : page)
        + ".l"
        + snippet.fenceLine();
  }

  /** Braces opened minus closed, outside string literals and line comments (good enough here). */
  private static int braceDelta(String text) {
    int delta = 0;
    boolean inString = false;
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      if (inString) {
        if (c == '\\') {
          i++;
        } else if (c == '"') {
          inString = false;
        }
      } else if (c == '"') {
        inString = true;
      } else if (c == '/' && i + 1 < text.length() && text.charAt(i + 1) == '/') {
        break;
      } else if (c == '{') {
        delta++;
      } else if (c == '}') {
        delta--;
      }
    }
    return delta;
  }

  /** The classpath of this test run: surefire's test classpath. */
  private static String classpath() {
    String classpath = System.getProperty("surefire.test.class.path");
    if (classpath == null || classpath.isBlank()) {
      classpath = System.getProperty("java.class.path");
    }
    return classpath;
  }
}
