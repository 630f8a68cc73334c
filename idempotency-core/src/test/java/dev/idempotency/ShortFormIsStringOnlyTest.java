package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.StringWriter;
import java.net.URI;
import java.nio.file.Path;
import java.util.List;
import javax.tools.JavaCompiler;
import javax.tools.JavaFileObject;
import javax.tools.SimpleJavaFileObject;
import javax.tools.ToolProvider;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * SPEC section 3: no call that compiles may lose its result on a replay. The short forms store
 * strings only, so a sender of another type must not compile against them; it names a codec.
 * Checked with the real compiler against the real API.
 */
class ShortFormIsStringOnlyTest {

  private static String compile(String body, Path out) {
    String source =
        "import dev.idempotency.*;\n"
            + "import java.time.Duration;\n"
            + "import java.util.concurrent.CompletableFuture;\n"
            + "class Caller {\n"
            + "  record Receipt(String id) {}\n"
            + "  void call(IdempotencyGuard guard, Duration ttl) {\n"
            + body
            + "\n  }\n}\n";
    JavaFileObject file =
        new SimpleJavaFileObject(URI.create("string:///Caller.java"), JavaFileObject.Kind.SOURCE) {
          @Override
          public CharSequence getCharContent(boolean ignoreEncodingErrors) {
            return source;
          }
        };
    JavaCompiler compiler = ToolProvider.getSystemJavaCompiler();
    StringWriter errors = new StringWriter();
    boolean ok =
        compiler
            .getTask(
                errors,
                null,
                null,
                List.of(
                    "-classpath",
                    System.getProperty("java.class.path"),
                    "-d",
                    out.toString(),
                    "-proc:none"),
                null,
                List.of(file))
            .call();
    return ok ? "" : errors.toString().isEmpty() ? "failed" : errors.toString();
  }

  @Test
  void aStringSenderCompilesAgainstTheShortForms(@TempDir Path out) {
    assertThat(
            compile(
                "String id = guard.execute(\"k\", ttl, ctx -> \"n_1\");\n"
                    + "guard.executeAsync(\"k\", ttl, ctx ->"
                    + " CompletableFuture.completedFuture(\"n_1\"));",
                out))
        .isEmpty();
  }

  @Test
  void aSenderOfAnotherTypeDoesNotCompileAgainstTheShortForm(@TempDir Path out) {
    assertThat(compile("guard.execute(\"k\", ttl, ctx -> new Receipt(\"r\"));", out))
        .contains("error");
    assertThat(
            compile(
                "guard.executeAsync(\"k\", ttl, ctx -> CompletableFuture.completedFuture(42));",
                out))
        .contains("error");
  }

  @Test
  void withItsCodecASenderOfAnotherTypeCompiles(@TempDir Path out) {
    assertThat(
            compile(
                "ResultCodec<Receipt> codec = ResultCodec.ofText(Receipt::id, Receipt::new);\n"
                    + "Receipt r = guard.execute(\"k\", ttl, codec, ctx -> new Receipt(\"r\"));\n"
                    + "guard.executeAsync(\"k\", ttl, codec, ctx ->"
                    + " CompletableFuture.completedFuture(new Receipt(\"r\")));",
                out))
        .isEmpty();
  }
}
