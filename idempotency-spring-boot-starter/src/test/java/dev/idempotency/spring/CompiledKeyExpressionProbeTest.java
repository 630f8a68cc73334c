package dev.idempotency.spring;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Probe (probeV) of fixmethodkey (78bd80e): an {@code @Idempotent} key whose evaluation fails is an
 * {@link InvalidKeyException} (a poison message on a listener: RabbitMQ rejects it without requeue,
 * Kafka's error handler does not retry it) unless code the key calls threw, which is that code's
 * own failure, retried ({@code ExpressionAttributes.failedOnItsInput}, shared with
 * {@code @IdempotentListener}'s keys). That tells the two apart by the shape of SpEL's interpreted
 * exceptions. With Spring's {@code spring.expression.compiler.mode=immediate} (a system property or
 * a {@code spring.properties} entry; SpEL compiles an expression after its second evaluation) a
 * compiled key's failure, whatever threw, is one {@code SpelEvaluationException}
 * (EXCEPTION_RUNNING_COMPILED_EXPRESSION) wrapping it. Each row runs {@link
 * CompiledKeyExpressionProbe} in its own JVM (the mode is read once per JVM), once per class: the
 * compiled row compares its results with the interpreted row's. The starter's parser names the mode
 * OFF, so the two rows agree.
 */
class CompiledKeyExpressionProbeTest {

  /**
   * Each compiler mode's results, from its one JVM: the interpreted run serves both rows (CI time:
   * a JVM that starts a Spring context costs seconds on the busy machine).
   */
  private static final Map<String, List<String>> RESULTS = new ConcurrentHashMap<>();

  /** SpEL interpreted (the default): a transient look-up failure is its own failure. */
  @Test
  void interpretedATransientLookUpIsItsOwnFailure() throws Exception {
    List<String> results = run("off");
    assertThat(results)
        .noneMatch(line -> line.contains("InvalidKeyException"))
        .noneMatch(line -> line.contains("InvalidIdempotencyKeyException"))
        .contains(
            "RESULT getter flaky: threw SpelEvaluationException (EL1021E: A problem occurred whilst"
                + " attempting to access the property 'ref': 'Unable to access property 'ref'"
                + " through getter method')",
            "RESULT getter flaky: sent-3",
            "RESULT static flaky: threw IllegalStateException (the look-up timed out (transient))",
            "RESULT static flaky: sent-6",
            "RESULT listener flaky: threw SpelEvaluationException (EL1021E: A problem occurred"
                + " whilst attempting to access the property 'ref': 'Unable to access property"
                + " 'ref' through getter method')",
            "RESULT listener flaky: sent-3");
  }

  /*
   * Was an open finding (probeV, on 164f714; medium: a lost send under a documented Spring
   * setting), fixed by fixspel: the starter parses its keys and fingerprints with its own parser,
   * whose configuration names SpelCompilerMode.OFF (ExpressionAttributes.parser(); an explicit
   * mode wins over spring.expression.compiler.mode), so they are interpreted in every mode and
   * failedOnItsInput sees the interpreter's exceptions. Failed before on Boot 3.5 and 4.0: with
   * spring.expression.compiler.mode=immediate, a getter (#order.ref) or static look-up
   * (T(..Keys).of(#p0)) that failed once was taken for a key that cannot be evaluated for the
   * arguments, "RESULT getter flaky: threw InvalidKeyException (the key '#order.ref' of
   * compiled-getter cannot be evaluated for these arguments (SpelEvaluationException, the cause
   * below); nothing ran)", and the listener rows (added by fixspel) threw
   * InvalidIdempotencyKeyException: on a @RabbitListener or @KafkaListener a poison message,
   * rejected without requeue / not retried, its send lost. Now the same as interpreted.
   */
  @Test
  void compiledATransientLookUpIsItsOwnFailureNotAnInvalidKey() throws Exception {
    List<String> results = run("immediate");
    assertThat(results)
        .as("a look-up that failed once, in a key, with the compiler mode immediate")
        .noneMatch(line -> line.contains("InvalidKeyException"))
        .noneMatch(line -> line.contains("InvalidIdempotencyKeyException"))
        .containsExactlyElementsOf(run("off"));
  }

  /** The probe's results in {@code compilerMode}, from its JVM, run once per class. */
  private static synchronized List<String> run(String compilerMode) throws Exception {
    List<String> results = RESULTS.get(compilerMode);
    if (results == null) {
      results = runProbe(compilerMode);
      RESULTS.put(compilerMode, results);
    }
    return results;
  }

  private static List<String> runProbe(String compilerMode) throws Exception {
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    File out = File.createTempFile("compiled-key-probe", ".txt");
    out.deleteOnExit();
    Process process =
        new ProcessBuilder(
                java,
                "-XX:TieredStopAtLevel=1",
                "-XX:+UseSerialGC",
                "-Dspring.expression.compiler.mode=" + compilerMode,
                "-cp",
                System.getProperty("java.class.path"),
                CompiledKeyExpressionProbe.class.getName())
            .redirectErrorStream(true)
            .redirectOutput(out)
            .start();
    boolean ended = process.waitFor(180, TimeUnit.SECONDS);
    if (!ended) {
      process.destroyForcibly();
    }
    String output = Files.readString(out.toPath(), StandardCharsets.UTF_8);
    assertThat(ended).as("the probe's JVM ended within 180 s; its output:\n" + output).isTrue();
    List<String> results = output.lines().filter(line -> line.startsWith("RESULT")).toList();
    assertThat(results).as("the probe's output:\n" + output).hasSize(12);
    return results;
  }
}
