package dev.idempotency.spring.suite;

import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.suite.KafkaTransactionStopFixture.RefusedOnce;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.assertj.core.api.SoftAssertions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.support.KafkaHeaders;
import org.springframework.messaging.handler.annotation.Header;

/**
 * probeS, of fixpeek (440dcc45): a Kafka batch listener in its container's Kafka transaction, the
 * batch stopped at a message that always fails and the first dead letter refused (the container's
 * transaction rolls back once; {@link KafkaTransactionStopFixture}). {@code TransactionProduces}
 * counts a record for the messages the listener first read from its list since the records before
 * it. This listener decides each message's way of sending from the batch's header list ({@code
 * KafkaHeaders.BATCH_CONVERTED_HEADERS}, a parameter beside its list), not from its list: for a
 * {@code tx-} message it produces the record (its value the header's id) and only then reads the
 * message from its list (to log it, as a listener that reports what it sent does); a {@code call-}
 * message is read and sent to the provider; {@code bad-} always fails. Batch {@code [call-0, tx-1,
 * bad-2, tx-3]}. The promise (SPEC 1, 15): message 0 sent to the provider once (at most twice, the
 * second send the starter documents for a record it cannot attribute), message 1's record committed
 * once, message 2 never, message 3's record committed once.
 */
class KafkaTransactionStopHeaderReadProbeTest {

  static final String LISTENER = "probe-s-kafka-tx-header-read";

  /**
   * The record of message 1 is produced before the listener first reads message 1 from its list,
   * after it read message 0: counted for message 0, so after the rollback message 0 would be
   * released and message 1 recorded, though the abort discarded its record.
   */
  // Open finding (probeS, Boot 3.5 and 4.0 at 76f2b4f3, the same on both; severity low to medium:
  // a lost send, SPEC 1, for a batch listener in a Kafka container transaction that produces a
  // message's record before it first reads that message from its list, taking what it sends from
  // another parameter (a header list), and whose batch then stops and has its transaction rolled
  // back). Expected: message 1's record committed once. Happened: "listener calls: 3, recoveries:
  // 2, outbound committed: [0, 0, 0, 1], provider sends of message 0: 2, dead-lettered: 1". The
  // record of message 1 was produced after the listener read message 0 and before it read message
  // 1, so TransactionProduces counted it for message 0 (first read since the records before it):
  // after the rollback message 0 was released (its provider call made again) and message 1, read
  // and so counted as sent, was recorded with no record counted for it; its redelivery was a
  // replay, and the abort had discarded its record. fixpeek's rule holds for every record produced
  // after its message was first read from the list; a read of the list is all the starter sees.
  @Tag("open-finding")
  @Test
  void aListenerProducingBeforeItReadsTheMessageFromItsListLosesNoSend() throws Exception {
    String name = "probe-s-header-read";
    String topic = "idem." + name + "-" + UUID.randomUUID();
    SuiteProvider provider = new SuiteProvider();
    try (KafkaListenerApplication application =
        KafkaTransactionStopFixture.start(name, topic, provider, HeaderReadListeners.class)) {
      HeaderReadListener listener = application.context().getBean(HeaderReadListener.class);
      RefusedOnce recoverer = application.context().getBean(RefusedOnce.class);
      String id = UUID.randomUUID().toString();
      String[] keys = {"call-0-" + id, "tx-1-" + id, "bad-2-" + id, "tx-3-" + id};
      application.publishInOneBatch(keys);
      List<String> seen =
          KafkaTransactionStopFixture.awaitCommitted(
              application,
              topic + ".out",
              Duration.ofSeconds(120),
              "message 3 produced and committed",
              committed -> committed.contains(keys[3]));
      String facts =
          "listener calls: "
              + listener.calls()
              + ", recoveries: "
              + recoverer.calls()
              + ", outbound committed: "
              + KafkaTransactionStopFixture.counts(seen, keys)
              + ", provider sends of message 0: "
              + provider.sends(keys[0])
              + ", dead-lettered: "
              + application.deadLettered().size();
      SoftAssertions.assertSoftly(
          softly -> {
            softly.assertThat(recoverer.calls()).as("recoveries (" + facts + ")").isGreaterThan(1);
            softly
                .assertThat(provider.sends(keys[0]))
                .as("provider sends of message 0 (" + facts + ")")
                .isBetween(1, 2);
            softly
                .assertThat(KafkaTransactionStopFixture.counts(seen, keys))
                .as("committed outbound records of each message (" + facts + ")")
                .containsExactly(0, 1, 0, 1);
          });
    }
  }

  /** The listener ({@link KafkaTransactionStopFixture} adds its topic and error handler). */
  @Configuration(proxyBeanMethods = false)
  static class HeaderReadListeners {
    @Bean
    HeaderReadListener probeSHeaderReadListener(
        KafkaTemplate<Object, Object> template,
        SuiteProvider provider,
        @Value("${suite.kafka.topic}") String topic) {
      return new HeaderReadListener(template, provider, topic + ".out");
    }
  }

  /**
   * Sends each message of its batch, choosing the way from the message's {@code Idempotency-Key}
   * header in the batch's header list: {@code tx-} produced to the outbound topic (the header's
   * value), then read from the list; {@code call-} read, then sent to the provider; {@code bad-}
   * read, then failed. Where the header list is not aligned with its list (the starter skipped a
   * replay), each message is read from the list first.
   */
  public static class HeaderReadListener {
    private final KafkaTemplate<Object, Object> template;
    private final SuiteProvider provider;
    private final String outbound;
    private final AtomicInteger calls = new AtomicInteger();
    final List<String> logged = new CopyOnWriteArrayList<>();

    HeaderReadListener(KafkaTemplate<Object, Object> template, SuiteProvider provider, String out) {
      this.template = template;
      this.provider = provider;
      this.outbound = out;
    }

    int calls() {
      return calls.get();
    }

    @KafkaListener(
        id = LISTENER,
        topics = "${suite.kafka.topic}",
        groupId = "${suite.kafka.topic}",
        batch = "true")
    @IdempotentListener(name = LISTENER)
    public void batch(
        List<String> list,
        @Header(KafkaHeaders.BATCH_CONVERTED_HEADERS) List<Map<String, Object>> headers) {
      calls.incrementAndGet();
      // the starter cuts the header list down to the messages of the list (BatchHeaderArguments);
      // a listener that could not rely on that would read the list where the lengths differ
      boolean aligned = headers.size() == list.size();
      for (int i = 0; i < list.size(); i++) {
        String id = aligned ? idOf(headers.get(i)) : "";
        if (id.startsWith("tx-")) {
          KafkaTransactionStopFixture.sendMixed(template, provider, outbound, i, id);
          logged.add(list.get(i)); // what it sent, reported after the send
        } else {
          KafkaTransactionStopFixture.sendMixed(template, provider, outbound, i, list.get(i));
        }
      }
    }

    private static String idOf(Map<String, Object> headers) {
      Object value = headers.get("Idempotency-Key");
      return value instanceof byte[] bytes
          ? new String(bytes, StandardCharsets.UTF_8)
          : String.valueOf(value);
    }
  }
}
