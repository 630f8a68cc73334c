package dev.idempotency.docscheck;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Every java block of README.md and docs/ compiles, and every relative link resolves. */
class DocsTest {

  /**
   * The blocks shown but deliberately not compiled ({@code <!-- snippet-kind: not-compiled: why
   * -->}), as {@code page:line}. Marking a block so, or removing the mark, changes this list.
   */
  private static final List<String> NOT_COMPILED = List.of();

  /** A floor, so that a parser that stops finding blocks cannot pass by compiling none. */
  private static final int AT_LEAST_COMPILED = 20;

  static Path root() {
    return Path.of(System.getProperty("docs.root", "..")).toAbsolutePath().normalize();
  }

  static List<Snippet> allSnippets() {
    List<Snippet> snippets = new ArrayList<>();
    for (Path page : MarkdownPage.guidePages(root())) {
      snippets.addAll(MarkdownPage.read(root(), page).javaSnippets());
    }
    return snippets;
  }

  @Test
  void everyJavaBlockCompiles() {
    List<Snippet> snippets = allSnippets();
    SnippetCompiler.Result result = new SnippetCompiler().compile(snippets);
    List<String> notCompiled =
        snippets.stream()
            .filter(s -> s.kind() == Snippet.Kind.NOT_COMPILED)
            .map(Snippet::location)
            .toList();
    System.out.printf(
        "docs-check: %d java blocks, %d compiled, %d not compiled by their mark %s%n",
        snippets.size(), result.compiled(), notCompiled.size(), notCompiled);

    assertThat(result.errors())
        .withFailMessage(
            "java blocks of the documentation do not compile:%n%s",
            String.join(System.lineSeparator(), result.errors()))
        .isEmpty();
    assertThat(notCompiled).containsExactlyInAnyOrderElementsOf(NOT_COMPILED);
    assertThat(result.compiled()).isEqualTo(snippets.size() - notCompiled.size());
    assertThat(result.compiled()).isGreaterThanOrEqualTo(AT_LEAST_COMPILED);
  }

  @Test
  void everyRelativeLinkAndAnchorResolves() {
    LinkChecker checker = new LinkChecker(root());
    List<String> broken = new ArrayList<>();
    List<Path> pages = MarkdownPage.guidePages(root());
    for (Path page : pages) {
      broken.addAll(checker.check(page));
    }
    assertThat(broken)
        .withFailMessage("broken links:%n%s", String.join(System.lineSeparator(), broken))
        .isEmpty();
    assertThat(pages).hasSizeGreaterThan(10);
  }
}
