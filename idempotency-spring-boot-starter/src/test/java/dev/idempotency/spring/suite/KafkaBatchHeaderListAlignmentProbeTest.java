package dev.idempotency.spring.suite;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.EmbeddedKafka;
import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import dev.idempotency.testservers.Poll;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.junit.jupiter.api.Test;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.core.ProducerFactory;
import org.springframework.kafka.support.KafkaHeaders;
import org.springframework.messaging.handler.annotation.Header;
import org.springframework.messaging.handler.annotation.Headers;

/**
 * probeS, on the shared in-JVM KRaft broker: a guarded Kafka batch listener that takes, beside its
 * list of payloads, the batch's record keys as a header list ({@code @Header(KafkaHeaders
 * .RECEIVED_KEY) List<String>}, Spring Kafka's usual way of reading a batch's keys), each record's
 * key naming the message's recipient. The starter hands the listener only the messages to send (a
 * message sent before is skipped, its delivery a replay); the header list is the container's. A
 * batch {@code [a (sent before), b]}: message b must go to its own recipient, once, by the header
 * list and by the {@code @Headers} map's list alike.
 */
class KafkaBatchHeaderListAlignmentProbeTest {

  static final String LISTENER = "probe-s-kafka-header-list";

  // Was an open finding (probeS, Boot 3.5 and 4.0 at 76f2b4f3): the starter replaced the list
  // parameter with the messages to send and passed the header lists as the container made them,
  // so b went to recipient-of-a ("[b-… -> recipient-of-a]"; the calls "[a-…] / [recipient-of-a],
  // [b-…] / [recipient-of-a, recipient-of-b]"). The starter now cuts each header list (and each
  // list of a @Headers map) down to the messages it hands out (BatchHeaderArguments).
  @Test
  void aBatchWhoseFirstMessageIsAReplaySendsTheNextToItsOwnRecipient() throws Exception {
    String topic = "idem.probe-s-header-list-" + UUID.randomUUID();
    try (KafkaListenerApplication application =
        KafkaListenerApplication.start(
            new SwitchableKeyStore(),
            new SuiteProvider(),
            new CountDownLatch(1),
            topic,
            "none",
            new Class<?>[] {HeaderListListeners.class})) {
      String id = UUID.randomUUID().toString();
      String a = "a-" + id;
      String b = "b-" + id;
      publishInOneBatch(application, topic, new String[][] {{a, "recipient-of-a"}});
      Poll.within(Duration.ofSeconds(60))
          .every(Duration.ofMillis(100))
          .until(
              "message a sent", () -> HeaderListListener.sent.contains(a + " -> recipient-of-a"));
      publishInOneBatch(
          application, topic, new String[][] {{a, "recipient-of-a"}, {b, "recipient-of-b"}});
      Poll.within(Duration.ofSeconds(60))
          .every(Duration.ofMillis(100))
          .until(
              "message b sent",
              () -> HeaderListListener.sent.stream().anyMatch(s -> s.startsWith(b)));

      assertThat(HeaderListListener.sent.stream().filter(s -> s.startsWith(b)).toList())
          .as(
              "sends of message b (the listener's calls, each its list and header list: %s)",
              HeaderListListener.calls)
          .containsExactly(b + " -> recipient-of-b");
      assertThat(HeaderListListener.sentByHeadersMap.stream().filter(s -> s.startsWith(b)).toList())
          .as("sends of message b by the @Headers map's key list (%s)", HeaderListListener.calls)
          .containsExactly(b + " -> recipient-of-b");
    }
  }

  /**
   * Publishes each {payload, record key} in one record batch, each message keyed for the guard by
   * its payload ({@code Idempotency-Key}), so that the listener's consumer fetches them together.
   */
  @SuppressWarnings("unchecked")
  private static void publishInOneBatch(
      KafkaListenerApplication application, String topic, String[][] messages) throws Exception {
    Map<String, Object> configs =
        new HashMap<>(
            application.context().getBean(ProducerFactory.class).getConfigurationProperties());
    configs.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, EmbeddedKafka.bootstrapServers());
    configs.put(ProducerConfig.LINGER_MS_CONFIG, 60_000);
    try (Producer<String, String> producer = new KafkaProducer<>(configs)) {
      List<Future<RecordMetadata>> sent = new ArrayList<>();
      for (String[] message : messages) {
        ProducerRecord<String, String> record =
            new ProducerRecord<>(topic, 0, message[1], message[0]);
        record.headers().add("Idempotency-Key", message[0].getBytes(StandardCharsets.UTF_8));
        sent.add(producer.send(record));
      }
      producer.flush();
      for (Future<RecordMetadata> each : sent) {
        each.get(30, TimeUnit.SECONDS);
      }
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class HeaderListListeners {
    @Bean
    HeaderListListener probeSHeaderListListener() {
      return new HeaderListListener();
    }
  }

  /** Sends each payload to the recipient its record's key names. */
  public static class HeaderListListener {
    // static: the bean the context holds is the guard's proxy
    static final List<String> sent = new CopyOnWriteArrayList<>();
    static final List<String> calls = new CopyOnWriteArrayList<>();
    static final List<String> sentByHeadersMap = new CopyOnWriteArrayList<>();

    @KafkaListener(
        id = LISTENER,
        topics = "${suite.kafka.topic}",
        groupId = "${suite.kafka.topic}",
        batch = "true")
    @IdempotentListener(name = LISTENER)
    public void batch(
        List<String> payloads,
        @Header(KafkaHeaders.RECEIVED_KEY) List<String> recipients,
        @Headers Map<String, Object> headers) {
      List<?> keys = (List<?>) headers.get(KafkaHeaders.RECEIVED_KEY);
      calls.add(List.copyOf(payloads) + " / " + recipients + " / " + keys);
      for (int i = 0; i < payloads.size(); i++) {
        sent.add(payloads.get(i) + " -> " + recipients.get(i));
        sentByHeadersMap.add(payloads.get(i) + " -> " + keys.get(i));
      }
    }
  }
}
