package dev.idempotency.spring.messaging.rabbit;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.core.Declarables;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.rabbit.annotation.RabbitListener;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.http.MediaType;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.util.MimeType;

/**
 * probeP, of 9eea31e6, on a real RabbitMQ broker (Boot's default container, requeue on failure):
 * the listener side of KeyConversionBadInputEndpointProbeTest. A payload-keyed listener whose key
 * expression converts the String payload to a {@link MimeType} (spring-core) or a {@link MediaType}
 * (spring-web); the payload is never a type (no '/'): a bad key every time, a poison message that
 * must be rejected without requeue (dead-lettered) after one attempt, nothing sent.
 */
@SpringBootTest(
    classes = RabbitKeyConversionBadInputProbeTest.App.class,
    properties = "logging.level.org.springframework.amqp.rabbit.listener=OFF")
@DirtiesContext
class RabbitKeyConversionBadInputProbeTest extends RabbitProbeSupport {

  static final String QUEUE = "idem.key-conversion-bad-input-probe";

  static final List<String> sent = new CopyOnWriteArrayList<>();

  /** The key evaluations per payload (each delivery evaluates the key once). */
  static final Map<String, AtomicInteger> attempts = new ConcurrentHashMap<>();

  /** The key's parts: counts the evaluation, then converts the payload. */
  public static final class Keys {
    private Keys() {}

    /**
     * Counts an evaluation of the key.
     *
     * @param event the payload
     * @return an empty prefix
     */
    public static String counted(String event) {
      attempts.computeIfAbsent(event, e -> new AtomicInteger()).incrementAndGet();
      return "";
    }

    /**
     * The key of a MIME type's notice.
     *
     * @param type the type, converted with MimeType.valueOf
     * @return the key
     */
    public static String mimeKey(MimeType type) {
      return "mime-" + type;
    }

    /**
     * The key of a media type's notice.
     *
     * @param type the type, converted with MediaType.valueOf
     * @return the key
     */
    public static String mediaKey(MediaType type) {
      return "media-" + type;
    }
  }

  static final String KEYS =
      "T(dev.idempotency.spring.messaging.rabbit" + ".RabbitKeyConversionBadInputProbeTest$Keys)";

  public static class Listeners {
    /** Keyed by a conversion of its payload, in Boot's container. */
    @RabbitListener(id = "key-conversion-bad-input-probe", queues = QUEUE)
    @IdempotentListener(
        name = "key-conversion-bad-input-probe",
        key =
            KEYS
                + ".counted(#event) + (#event.startsWith('mime') ? "
                + KEYS
                + ".mimeKey(#event) : (#event.startsWith('media') ? "
                + KEYS
                + ".mediaKey(#event) : #event))")
    public void listen(String event) {
      sent.add(event);
    }
  }

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ListenerTestConfiguration.class)
  static class App {
    @Bean
    Listeners keyConversionBadInputProbeListeners() {
      return new Listeners();
    }

    @Bean
    Declarables keyConversionBadInputProbeQueues() {
      return deadLetteredQueues(QUEUE);
    }
  }

  @Override
  List<String> sends() {
    return sent;
  }

  /** Converted by spring-core's MimeType.valueOf: dead-lettered after one attempt. */
  @Test
  void aBadKeyConvertedBySpringCoreIsDeadLetteredAfterOneAttempt() throws Exception {
    assertDeadLetteredAfterOneAttempt("mime");
  }

  /*
   * Was an open finding, fixed by fixconv: ExpressionAttributes tells Spring's classes outside the
   * packages a conversion runs through by the jar they came from (its manifest's title, as their
   * class loader read it), not by their package: spring-web's MediaType is Spring's. After the
   * fix: dead-lettered after one attempt, nothing sent, on Boot 3.5 and 4.0. The finding (probeP,
   * of 9eea31e6; severity other in SPEC 1's terms: nothing can be sent for a
   * bad key, so no second or lost send; but a poison message is requeued in a loop). The same bad
   * payload, converted by spring-web's MediaType.valueOf (InvalidMediaTypeException thrown from
   * org.springframework.http, no longer counted as Spring's): taken for the called code's failure
   * and requeued. Expected: dead-lettered, one attempt. Happened on Boot 3.5.7 and 4.0.7 (probeP,
   * on 7efd6b9a): nothing dead-lettered within 15 s, the key evaluated 17077 (3.5) and 18106 (4.0)
   * times in that time: a requeue hot loop until the application stops; the "mime" row (same
   * payload shape, spring-core's MimeType) dead-lettered after one attempt on both lines. Slow when
   * it fails (15 s).
   */
  @Test
  void aBadKeyConvertedBySpringWebIsDeadLetteredAfterOneAttempt() throws Exception {
    assertDeadLetteredAfterOneAttempt("media");
  }

  private void assertDeadLetteredAfterOneAttempt(String kind) throws Exception {
    String event = unique(kind);
    plain.send("", QUEUE, withoutKey(event));
    await("the key evaluated", () -> attempts.containsKey(event));
    Message dead = plain.receive(QUEUE + DEAD_LETTERS, 15_000);
    int seen = attempts.get(event).get();

    assertThat(dead == null ? null : new String(dead.getBody(), StandardCharsets.UTF_8))
        .as("dead-lettered (key evaluations so far: %d)", seen)
        .isEqualTo(event);
    assertThat(attempts.get(event)).as("key evaluations").hasValue(1);
    assertThat(sent(event)).as("sends").isZero();
  }
}
