package dev.idempotency.docscheck;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The checks themselves: they fail, and say where, when the documentation is wrong. */
class DocsCheckSelfTest {

  private static SnippetCompiler.Result compile(String page) {
    return new SnippetCompiler().compile(MarkdownPage.of("docs/example.md", page).javaSnippets());
  }

  @Test
  void aSnippetCallingARenamedMethodFailsWithItsPageLineAndTheCompilersMessage() {
    String page =
        """
        # Example

        <!-- snippet-context: IdempotencyGuard guard; String userId;
        import dev.idempotency.IdempotencyGuard;
        -->
        ```java
        import dev.idempotency.IdempotencyWindows;

        String id = guard.executeOnce(userId, IdempotencyWindows.TRANSACTIONAL, ctx -> "sent");
        ```
        """;

    SnippetCompiler.Result result = compile(page);

    assertThat(result.compiled()).isEqualTo(1);
    assertThat(result.errors()).hasSize(1);
    assertThat(result.errors().get(0))
        .startsWith("docs/example.md:9: error: cannot find symbol")
        .contains("executeOnce")
        .contains("guard.executeOnce(userId");
  }

  @Test
  void theSameSnippetWithTheRealMethodCompiles() {
    String page =
        """
        <!-- snippet-context: IdempotencyGuard guard; String userId;
        import dev.idempotency.IdempotencyGuard;
        -->
        ```java
        import dev.idempotency.IdempotencyWindows;

        String id = guard.execute(userId, IdempotencyWindows.TRANSACTIONAL, ctx -> "sent");
        ```
        """;

    assertThat(compile(page).errors()).isEmpty();
  }

  @Test
  void aMissingContextIsReportedOnTheSnippetsLine() {
    String page =
        """
        Text.

        ```java
        guard.execute("k", java.time.Duration.ofHours(1), ctx -> "sent");
        ```
        """;

    assertThat(compile(page).errors())
        .singleElement()
        .asString()
        .startsWith("docs/example.md:4: error: cannot find symbol")
        .contains("guard");
  }

  @Test
  void membersUnitsAndNotCompiledBlocks() {
    String page =
        """
        <!-- snippet-kind: members -->
        ```java
        @Deprecated
        String name() {
          return "members";
        }
        ```

        ```java
        import java.util.List;

        public class Recipients {
          List<String> all() {
            return List.of(Helper.ONE);
          }
        }
        ```
        <!-- snippet-context:
        class Helper { static final String ONE = "one"; }
        -->

        <!-- snippet-kind: not-compiled: shows a mistake -->
        ```java
        this is not Java
        ```
        """;

    List<Snippet> snippets = MarkdownPage.of("docs/example.md", page).javaSnippets();
    assertThat(snippets)
        .extracting(Snippet::kind)
        .containsExactly(Snippet.Kind.MEMBERS, Snippet.Kind.AUTO, Snippet.Kind.NOT_COMPILED);
    assertThat(snippets.get(2).reason()).isEqualTo("shows a mistake");
    // the context of the unit sits below it here, so it does not apply: Helper is missing
    SnippetCompiler.Result result = new SnippetCompiler().compile(snippets);
    assertThat(result.compiled()).isEqualTo(2);
    assertThat(result.errors()).singleElement().asString().startsWith("docs/example.md:14: error");
  }

  @Test
  void aNotCompiledMarkNeedsAReason() {
    String page =
        """
        <!-- snippet-kind: not-compiled -->
        ```java
        x
        ```
        """;
    assertThatThrownBy(() -> MarkdownPage.of("docs/example.md", page).javaSnippets())
        .hasMessageContaining("docs/example.md:1")
        .hasMessageContaining("needs a reason");
  }

  @Test
  void slugsFollowGitHub() {
    assertThat(MarkdownPage.slug("`POST /notify` over HTTP")).isEqualTo("post-notify-over-http");
    assertThat(MarkdownPage.slug("Message consumers (Kafka, RabbitMQ, JMS)"))
        .isEqualTo("message-consumers-kafka-rabbitmq-jms");
    assertThat(MarkdownPage.slug("JDBC: the table is missing"))
        .isEqualTo("jdbc-the-table-is-missing");
    assertThat(MarkdownPage.of("x.md", "# A\n\n## A\n\n```\n# not a heading\n```\n").anchors())
        .containsExactly("a", "a-1");
  }

  @Test
  void brokenLinksAndAnchorsAreReportedWithPageAndLine(@TempDir Path root) throws IOException {
    Files.createDirectories(root.resolve("docs"));
    Files.writeString(root.resolve("docs/a.md"), "# Alpha\n\n## Beta section\n");
    Files.writeString(
        root.resolve("README.md"),
        """
        # Front

        [ok](docs/a.md#beta-section) and [ok too](#front)
        [missing page](docs/nope.md)
        [missing anchor](docs/a.md#gamma)
        `[in code](docs/nope.md)` and [a site](https://example.com/x)
        """);

    List<String> broken = new LinkChecker(root).check(root.resolve("README.md"));

    assertThat(broken)
        .containsExactly(
            "README.md:4: link docs/nope.md: no such file docs/nope.md",
            "README.md:5: link docs/a.md#gamma: no heading with anchor #gamma in docs/a.md");
  }
}
