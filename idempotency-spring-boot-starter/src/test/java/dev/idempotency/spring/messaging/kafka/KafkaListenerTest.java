package dev.idempotency.spring.messaging.kafka;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyKey;
import dev.idempotency.spring.messaging.BatchListenerContract;
import dev.idempotency.spring.messaging.EmbeddedKafka;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import dev.idempotency.spring.messaging.Sends;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.TestInstance;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.kafka.config.KafkaListenerEndpointRegistry;
import org.springframework.kafka.core.ConsumerFactory;
import org.springframework.kafka.core.KafkaAdmin;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.listener.CommonErrorHandler;
import org.springframework.kafka.listener.DeadLetterPublishingRecoverer;
import org.springframework.kafka.listener.DefaultErrorHandler;
import org.springframework.kafka.listener.adapter.RecordFilterStrategy;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import org.springframework.util.backoff.FixedBackOff;

/**
 * Issue 27's table on a real Kafka broker (KRaft, in this JVM), through Spring Boot's Kafka
 * auto-configuration. The application has its own error handler, as many do: three tries, then the
 * record goes to its {@code .DLT} topic. A deferred delivery never reaches it.
 */
@SpringBootTest(
    classes = KafkaListenerTest.App.class,
    properties = {
      "spring.kafka.consumer.group-id=idem-test",
      "spring.kafka.consumer.auto-offset-reset=earliest",
      "spring.kafka.consumer.max-poll-records=50"
    })
@DirtiesContext
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class KafkaListenerTest extends BatchListenerContract {

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ListenerTestConfiguration.class)
  static class App {
    @Bean
    KafkaListeners kafkaListeners(Sends sends) {
      return new KafkaListeners(sends);
    }

    /** Drops the payloads that start with {@code skip}, before the filtered batch listener. */
    @Bean
    RecordFilterStrategy<String, String> skipMarked() {
      return record -> record.value().startsWith("skip");
    }

    /** The application's own handler: 3 tries, then the dead-letter topic. */
    @Bean
    CommonErrorHandler errorHandler(KafkaTemplate<Object, Object> template) {
      return new DefaultErrorHandler(
          new DeadLetterPublishingRecoverer(
              template, (record, failure) -> new TopicPartition(record.topic() + ".DLT", 0)),
          new FixedBackOff(0, 2));
    }
  }

  @DynamicPropertySource
  static void kafka(DynamicPropertyRegistry registry) {
    EmbeddedKafka.addProperties(registry);
  }

  @Autowired KafkaTemplate<String, String> template;
  @Autowired KafkaAdmin kafkaAdmin;
  @Autowired ConsumerFactory<String, String> consumers;
  @Autowired KafkaListenerEndpointRegistry registry;
  Admin admin;

  @BeforeAll
  void admin() {
    admin = Admin.create(kafkaAdmin.getConfigurationProperties());
  }

  @AfterAll
  void closeAdmin() {
    admin.close();
  }

  static String topic(String listener) {
    return switch (listener) {
      case KafkaListeners.RECORD -> "idem.record";
      case KafkaListeners.DEAD_LETTER -> "idem.dead-letter";
      case KafkaListeners.HEADER -> "idem.header";
      case KafkaListeners.KEYED -> "idem.keyed";
      case KafkaListeners.BATCH -> "idem.batch";
      case KafkaListeners.FILTERED -> "idem.filtered";
      case KafkaListeners.RECORD_LIST -> "idem.record-list";
      case KafkaListeners.CONVERTED_KEY -> "idem.converted-key";
      case KafkaListeners.ENUM_KEY -> "idem.enum-key";
      case KafkaListeners.FRAMES_KEY -> "idem.frames-key";
      default -> throw new IllegalArgumentException(listener);
    };
  }

  /** A listener's consumer group: its container id. */
  static String group(String listener) {
    return listener.equals(KafkaListeners.HEADER) ? "kafka-header" : listener;
  }

  /**
   * A List parameter does not make a batch listener: a record listener of a list payload was taken
   * for one (issue 37, probe45a's finding), its header key looked for in each element, and the
   * record dead-lettered unsent. Failed before.
   */
  @org.junit.jupiter.api.Test
  void aRecordListenerOfAListPayloadRunsOnceWithTheWholeList() throws Exception {
    String id = UUID.randomUUID().toString().substring(0, 8);
    String value = "a-" + id + ",b-" + id;
    publish(KafkaListeners.RECORD_LIST, value, "order-" + id);
    publish(KafkaListeners.RECORD_LIST, value, "order-" + id);

    await("the list's send", () -> !sends.of(value).isEmpty());
    assertAcknowledged(KafkaListeners.RECORD_LIST);
    assertThat(sends.of(value)).as("one send of the whole list for one key").hasSize(1);
  }

  /**
   * A key whose argument SpEL converts through the application's {@code Customer.valueOf}, a
   * look-up that times out once: the look-up's own failure, which the error handler retries, and
   * the message is sent once, never dead-lettered as a poison message (SPEC 1: no lost send).
   * Failed before fixexpr on Boot 3.5 and 4.0: "[dead-lettered] Expecting empty but was:
   * ["flaky-96c9946c"]" (the conversion's failure taken for the key's: a poison message, unsent).
   */
  @org.junit.jupiter.api.Test
  void aKeyLookUpThatTheArgumentsConversionRunsAndFailsOnceIsRetriedAndSent() throws Exception {
    String event = unique("flaky");
    publish(KafkaListeners.CONVERTED_KEY, event, null);

    await(
        "the message sent, or dead-lettered",
        () ->
            !sends.of(event).isEmpty()
                || deadLettered(KafkaListeners.CONVERTED_KEY).contains(event));
    assertAcknowledged(KafkaListeners.CONVERTED_KEY);
    assertThat(deadLettered(KafkaListeners.CONVERTED_KEY)).as("dead-lettered").isEmpty();
    assertThat(sends.of(event)).as("sends of the message whose key look-up failed once").hasSize(1);
    assertThat(sends.of(event).get(0).providerKey())
        .isEqualTo(
            IdempotencyKey.providerKey(
                IdempotencyKey.of(KafkaListeners.CONVERTED_KEY, "customer-" + event)));
  }

  /*
   * Probe (probeI, of fixexpr d756130b; a lost send in SPEC 1's terms if it failed): the key's
   * argument (a Long) is converted to the application's enum Tier by SpEL's conversion service,
   * which calls Tier's own static of(Long): a look-up of the application's code, made to time out
   * once. Expected: retried by the error handler, sent once, not dead-lettered. The row failed on
   * d756130b and still after a238b7d0 on Boot 3.5 and 4.0 ("[dead-lettered] Expecting empty but
   * was: ["tier-..."]"), but not for that reason (probeL, seen on cd89fe43): its key built the Long as
   * T(java.lang.Long).valueOf(#event.length()), and SpEL cannot choose between Long.valueOf(long)
   * and Long.valueOf(String) for an Integer ("EL1033E: Method call of 'valueOf' is ambiguous", the
   * dead-letter record's exception header), so the key failed for every message before Tier.of
   * ran: a poison message rightly. The key now builds the Long as #event.length() + 0L, and the
   * row checks that Tier.of ran and failed; it passes since a238b7d0 on both lines (the unit twin
   * is ExpressionConversionEdgeProbeTest#theApplicationsEnumFactoryFailingIsTheCalledCodesFailure).
   */
  @org.junit.jupiter.api.Test
  void aKeyLookUpInTheApplicationsEnumThatFailsOnceIsRetriedAndSent() throws Exception {
    String event = unique("tier");
    KafkaListeners.Tier.failures.set(1);
    try {
      publish(KafkaListeners.ENUM_KEY, event, null);

      await(
          "the message sent, or dead-lettered",
          () ->
              !sends.of(event).isEmpty() || deadLettered(KafkaListeners.ENUM_KEY).contains(event));
      assertAcknowledged(KafkaListeners.ENUM_KEY);
      assertThat(KafkaListeners.Tier.failures).as("Tier.of ran and failed once").hasValue(0);
    } finally {
      KafkaListeners.Tier.failures.set(0);
    }
    assertThat(deadLettered(KafkaListeners.ENUM_KEY)).as("dead-lettered").isEmpty();
    assertThat(sends.of(event)).as("sends of the message whose key look-up failed once").hasSize(1);
  }

  /**
   * Probe (probeL, of a238b7d0): the application's look-up that the key's conversion runs fails
   * once, thrown from a class in a package starting with {@code kotlin.}, or through a JDK proxy
   * (frames of {@code jdk.proxy}, the handler the application's lambda): the application's frames
   * are found, the failure is retried and the message sent once. Held on Boot 3.5 and 4.0.
   */
  @org.junit.jupiter.params.ParameterizedTest
  @org.junit.jupiter.params.provider.ValueSource(strings = {"plan", "region"})
  void aLookUpThatFailsOnceFromOtherFramesIsRetriedAndSent(String kind) throws Exception {
    assertFramesLookUpFailingOnceIsRetriedAndSent(kind);
  }

  /*
   * Was an open finding, fixed (lead, after probeL): ExpressionAttributes counts as Spring's only
   * the packages a conversion runs through, and a failure carrying none of the conversion's own
   * frames as the called code's. The finding: probe (probeL, of a238b7d0), a lost send in SPEC 1's
   * terms. The application's
   * look-up that the key's conversion runs times out once, but the exception carries no frame
   * a238b7d0 counts as the application's: "pet", a type in org.springframework.samples (as Spring's
   * own sample applications name theirs), whose frames are taken for Spring's; "account", a
   * CompletableFuture joined with orTimeout(..).thenApply(..).join(), whose CompletionException and
   * TimeoutException were made on the JDK's timer thread (JDK frames only); "shop", a preallocated
   * exception without a stack trace (Kafka client's ApiExceptions, Netty's ReadTimeoutException,
   * the JIT's fast-thrown NullPointerException). Each is taken for the input's failure: an invalid
   * key, a poison message dead-lettered unsent at its first delivery, although the retry would
   * have sent it. Expected: retried, sent once, not dead-lettered. Happened on Boot 3.5.7 and
   * 4.0.7 (probeL, on cd89fe43): "[dead-lettered] Expecting empty but was: ["pet-..."]", the same
   * for "account-..." and "shop-..." (unit level: failedOnItsInput true for all three).
   */
  @org.junit.jupiter.params.ParameterizedTest
  @org.junit.jupiter.params.provider.ValueSource(strings = {"pet", "account", "shop"})
  void aLookUpThatFailsOnceWithoutTheApplicationsFramesIsRetriedAndSent(String kind)
      throws Exception {
    assertFramesLookUpFailingOnceIsRetriedAndSent(kind);
  }

  private void assertFramesLookUpFailingOnceIsRetriedAndSent(String kind) throws Exception {
    String event = unique(kind);
    java.util.concurrent.atomic.AtomicInteger failures =
        switch (kind) {
          case "pet" -> org.springframework.samples.idempotencyprobe.PetType.failures;
          case "plan" -> kotlin.idempotencyprobe.Plan.failures;
          case "account" -> dev.idempotency.spring.KeyConversionLookUps.Account.failures;
          case "shop" -> dev.idempotency.spring.KeyConversionLookUps.Shop.failures;
          default -> dev.idempotency.spring.KeyConversionLookUps.Region.failures;
        };
    failures.set(1);
    try {
      publish(KafkaListeners.FRAMES_KEY, event, null);

      await(
          "the message sent, or dead-lettered",
          () ->
              !sends.of(event).isEmpty()
                  || deadLettered(KafkaListeners.FRAMES_KEY).contains(event));
      assertAcknowledged(KafkaListeners.FRAMES_KEY);
      assertThat(failures).as("the look-up ran and failed once").hasValue(0);
    } finally {
      failures.set(0);
    }
    assertThat(deadLettered(KafkaListeners.FRAMES_KEY)).as("dead-lettered").doesNotContain(event);
    assertThat(sends.of(event)).as("sends of the message whose key look-up failed once").hasSize(1);
  }

  /** The application's handler is wrapped, not replaced: deferrals go to a handler of their own. */
  @org.junit.jupiter.api.Test
  void theContainersKeepTheApplicationsErrorHandlerForEverythingElse() {
    var container =
        (org.springframework.kafka.listener.AbstractMessageListenerContainer<?, ?>)
            registry.getListenerContainer(KafkaListeners.RECORD);
    assertThat(container.getCommonErrorHandler())
        .isInstanceOf(org.springframework.kafka.listener.CommonDelegatingErrorHandler.class);
  }

  /**
   * A {@code RecordFilterStrategy} hands the batch listener fewer messages than the container
   * polled: each message's header key is still its own (none is taken for a message without a key
   * and dead-lettered), and a failure the listener names by its index in the list it got is the
   * message the error handler retries and, once out of tries, dead-letters.
   */
  @org.junit.jupiter.api.Test
  void aFilteredBatchKeepsEachMessagesHeaderKeyAndFailureIndex() throws Exception {
    String first = unique("f-first");
    String second = unique("f-second");
    String failing = unique("f-failing");
    String last = unique("f-last");
    sends.failNext(failing, 100); // fails every try: the handler dead-letters it after three
    List<String> payloads =
        List.of(first, "skip-" + first, second, "skip-" + second, failing, last);
    try {
      for (String payload : payloads) {
        publish(KafkaListeners.FILTERED, payload, "key-" + payload);
      }
      registry.getListenerContainer(KafkaListeners.FILTERED).start();
      await(
          "the messages around the failing one",
          () ->
              sends.of(first).size() == 1
                  && sends.of(second).size() == 1
                  && sends.of(last).size() == 1);
      await(
          "the failing message dead-lettered",
          () -> deadLettered(KafkaListeners.FILTERED).contains(failing));
      assertAcknowledged(KafkaListeners.FILTERED);
      assertThat(deadLettered(KafkaListeners.FILTERED)).containsExactly(failing);
      assertThat(sends.runs(first)).isEqualTo(1);
      assertThat(sends.runs(second)).isEqualTo(1);
      assertThat(sends.runs(failing)).isEqualTo(3);
      assertThat(sends.of(first).get(0).providerKey())
          .isEqualTo(
              IdempotencyKey.providerKey(
                  IdempotencyKey.of(KafkaListeners.FILTERED, "key-" + first)));
      assertThat(sends.runs("skip-" + first)).isZero();
    } finally {
      registry.getListenerContainer(KafkaListeners.FILTERED).stop();
    }
  }

  @Override
  protected String recordListener() {
    return KafkaListeners.RECORD;
  }

  @Override
  protected String deadLetterListener() {
    return KafkaListeners.DEAD_LETTER;
  }

  @Override
  protected String keyedListener() {
    return KafkaListeners.KEYED;
  }

  /** Not retried by the error handler: its recoverer (the .DLT topic) takes it at once. */
  @Override
  protected int deliveriesOfAPoisonMessage() {
    return 1;
  }

  @Override
  protected String headerListener() {
    return KafkaListeners.HEADER;
  }

  @Override
  protected String batchListener() {
    return KafkaListeners.BATCH;
  }

  @Override
  protected void publish(String listener, String payload, String idempotencyKey) throws Exception {
    ProducerRecord<String, String> record = new ProducerRecord<>(topic(listener), payload);
    if (idempotencyKey != null) {
      record.headers().add("Idempotency-Key", idempotencyKey.getBytes(StandardCharsets.UTF_8));
    }
    template.send(record).get(30, TimeUnit.SECONDS);
  }

  @Override
  protected void publishBatch(List<String> payloads) throws Exception {
    for (String payload : payloads) {
      publish(KafkaListeners.BATCH, payload, null);
    }
    registry.getListenerContainer(KafkaListeners.BATCH).start();
  }

  @Override
  protected void afterBatch() {
    registry.getListenerContainer(KafkaListeners.BATCH).stop();
  }

  @Override
  protected List<String> deadLettered(String listener) {
    TopicPartition partition = new TopicPartition(topic(listener) + ".DLT", 0);
    List<String> payloads = new ArrayList<>();
    try (Consumer<String, String> consumer =
        consumers.createConsumer("dlt-reader-" + UUID.randomUUID(), null)) {
      consumer.assign(List.of(partition));
      consumer.seekToBeginning(List.of(partition));
      long end = consumer.endOffsets(List.of(partition)).get(partition);
      while (consumer.position(partition) < end) {
        for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
          payloads.add(record.value());
        }
      }
    }
    return payloads;
  }

  /** The group's committed offset reaches the end of the listener's topic. */
  @Override
  protected void assertAcknowledged(String listener) throws Exception {
    TopicPartition partition = new TopicPartition(topic(listener), 0);
    long end =
        admin
            .listOffsets(Map.of(partition, OffsetSpec.latest()))
            .partitionResult(partition)
            .get(30, TimeUnit.SECONDS)
            .offset();
    await(
        "the committed offset at " + end,
        () -> {
          try {
            OffsetAndMetadata committed =
                admin
                    .listConsumerGroupOffsets(group(listener))
                    .partitionsToOffsetAndMetadata()
                    .get(30, TimeUnit.SECONDS)
                    .get(partition);
            return committed != null && committed.offset() >= end;
          } catch (Exception e) {
            throw new IllegalStateException(e);
          }
        });
    assertThat(end).isPositive();
  }
}
