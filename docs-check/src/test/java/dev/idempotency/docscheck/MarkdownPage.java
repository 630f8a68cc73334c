package dev.idempotency.docscheck;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * A Markdown page read the way GitHub renders the parts we check: fenced code blocks (with the
 * directives above {@code ```java} ones), links outside code, and heading anchors.
 */
final class MarkdownPage {

  private static final Pattern FENCE = Pattern.compile("^(\\s*)(```+|~~~+)\\s*([^\\s`]*).*$");
  private static final Pattern HEADING = Pattern.compile("^ {0,3}(#{1,6})\\s+(.*?)\\s*#*\\s*$");
  private static final Pattern LINK =
      Pattern.compile(
          "!?\\[(?:[^\\[\\]]|\\[[^\\]]*\\])*\\]\\(\\s*<?([^)\\s>]+)>?(?:\\s+\"[^\"]*\")?\\)");
  private static final Pattern HTML_ID = Pattern.compile("<a\\s+(?:id|name)=\"([^\"]+)\"");
  private static final Pattern INLINE_CODE = Pattern.compile("(`+)(?:(?!\\1).)+?\\1");

  /** A link as written, with the 1-based line it is on. */
  record Link(int line, String target) {}

  private final String path;
  private final List<String> lines;

  private MarkdownPage(String path, List<String> lines) {
    this.path = path;
    this.lines = lines;
  }

  static MarkdownPage read(Path root, Path file) {
    try {
      return of(
          root.relativize(file).toString().replace('\\', '/'),
          Files.readString(file, StandardCharsets.UTF_8));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  static MarkdownPage of(String path, String text) {
    return new MarkdownPage(path, List.of(text.split("\r?\n", -1)));
  }

  /** README.md and every page under docs/, in a stable order. */
  static List<Path> guidePages(Path root) {
    List<Path> pages = new ArrayList<>();
    pages.add(root.resolve("README.md"));
    try (Stream<Path> walk = Files.walk(root.resolve("docs"))) {
      walk.filter(p -> p.toString().endsWith(".md")).sorted().forEach(pages::add);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return pages;
  }

  String path() {
    return path;
  }

  /** Every {@code ```java} block, including the ones marked not to be compiled. */
  List<Snippet> javaSnippets() {
    List<Snippet> snippets = new ArrayList<>();
    for (int i = 0; i < lines.size(); i++) {
      Matcher open = FENCE.matcher(lines.get(i));
      if (!open.matches()) {
        continue;
      }
      String indent = open.group(1);
      String fence = open.group(2);
      String language = open.group(3).toLowerCase(Locale.ROOT);
      int close = closingFence(i, fence);
      if (language.equals("java")) {
        List<String> body = new ArrayList<>();
        for (String line : lines.subList(i + 1, close)) {
          body.add(line.startsWith(indent) ? line.substring(indent.length()) : line.stripLeading());
        }
        snippets.add(withDirectives(i, body));
      }
      i = close;
    }
    return snippets;
  }

  /** The index of the line that closes the fence opened at {@code open} (or the last line). */
  private int closingFence(int open, String fence) {
    for (int j = open + 1; j < lines.size(); j++) {
      String line = lines.get(j).strip();
      if (line.length() >= fence.length() && line.chars().allMatch(c -> c == fence.charAt(0))) {
        return j;
      }
    }
    return lines.size() - 1;
  }

  /** Reads the HTML comments directly above the fence at {@code fence} (0-based). */
  private Snippet withDirectives(int fence, List<String> body) {
    Snippet.Kind kind = Snippet.Kind.AUTO;
    List<String> context = List.of();
    int contextLine = 0;
    String reason = "";
    int end = fence - 1;
    while (end >= 0 && lines.get(end).strip().endsWith("-->")) {
      int start = end;
      while (start > 0 && !lines.get(start).contains("<!--")) {
        start--;
      }
      StringBuilder text = new StringBuilder();
      for (int k = start; k <= end; k++) {
        text.append(lines.get(k)).append('\n');
      }
      String comment = text.toString().strip();
      comment = comment.substring(comment.indexOf("<!--") + 4, comment.lastIndexOf("-->")).strip();
      if (comment.startsWith("snippet-context:")) {
        String declarations = comment.substring("snippet-context:".length());
        context = List.of(declarations.split("\n", -1));
        contextLine = start + 1;
      } else if (comment.startsWith("snippet-kind:")) {
        String value = comment.substring("snippet-kind:".length()).strip();
        int colon = value.indexOf(':');
        String name = (colon < 0 ? value : value.substring(0, colon)).strip();
        kind = Snippet.Kind.valueOf(name.toUpperCase(Locale.ROOT).replace('-', '_'));
        reason = colon < 0 ? "" : value.substring(colon + 1).strip();
        if (kind == Snippet.Kind.NOT_COMPILED && reason.isEmpty()) {
          throw new IllegalArgumentException(
              path
                  + ":"
                  + (start + 1)
                  + ": snippet-kind: not-compiled needs a reason after a colon");
        }
      }
      end = start - 1;
    }
    return new Snippet(path, fence + 1, body, kind, context, contextLine, reason);
  }

  /** Every inline link and image outside code, with its line. */
  List<Link> links() {
    List<Link> links = new ArrayList<>();
    for (int i : proseLines()) {
      Matcher link = LINK.matcher(INLINE_CODE.matcher(lines.get(i)).replaceAll(""));
      while (link.find()) {
        links.add(new Link(i + 1, link.group(1)));
      }
    }
    return links;
  }

  /** The anchors GitHub gives this page's headings, plus explicit {@code <a id>} anchors. */
  List<String> anchors() {
    Map<String, Integer> seen = new LinkedHashMap<>();
    List<String> anchors = new ArrayList<>();
    for (int i : proseLines()) {
      String line = lines.get(i);
      Matcher id = HTML_ID.matcher(line);
      while (id.find()) {
        anchors.add(id.group(1));
      }
      Matcher heading = HEADING.matcher(line);
      if (heading.matches()) {
        String slug = slug(heading.group(2));
        int count = seen.merge(slug, 1, Integer::sum);
        anchors.add(count == 1 ? slug : slug + "-" + (count - 1));
      }
    }
    return anchors;
  }

  /** The 0-based indexes of the lines outside fenced code blocks (fences included in neither). */
  private List<Integer> proseLines() {
    List<Integer> prose = new ArrayList<>();
    for (int i = 0; i < lines.size(); i++) {
      Matcher open = FENCE.matcher(lines.get(i));
      if (open.matches()) {
        i = closingFence(i, open.group(2));
      } else {
        prose.add(i);
      }
    }
    return prose;
  }

  /**
   * GitHub's heading slug: the rendered text (links and emphasis reduced to their text, code spans
   * to their content), lower-cased, every character that is not a letter, digit, mark, space,
   * hyphen or underscore removed, and spaces turned into hyphens.
   */
  static String slug(String heading) {
    String text = heading.replaceAll("!?\\[([^\\]]*)\\]\\([^)]*\\)", "$1");
    text = text.replace("`", "").replaceAll("(\\*\\*|__|\\*)", "");
    text = text.replaceAll("<[^>]+>", "");
    text = text.toLowerCase(Locale.ROOT);
    text = text.replaceAll("[^\\p{L}\\p{N}\\p{M}\\p{Pc} -]", "");
    return text.replace(' ', '-');
  }
}
