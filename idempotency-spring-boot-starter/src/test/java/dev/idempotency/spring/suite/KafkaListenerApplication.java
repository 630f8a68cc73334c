package dev.idempotency.spring.suite;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.spring.messaging.EmbeddedKafka;
import dev.idempotency.spring.messaging.Events;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.kafka.core.ConsumerFactory;
import org.springframework.kafka.core.KafkaAdmin;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.core.ProducerFactory;

/**
 * A {@link SuiteKafkaApplication} on the shared in-JVM broker: published to with the application's
 * own template, its acknowledgement read as its group's committed offset, its dead letters read
 * from the {@code .DLT} topic.
 */
final class KafkaListenerApplication implements ListenerApplication {

  private final ConfigurableApplicationContext context;
  private final String topic;

  private KafkaListenerApplication(ConfigurableApplicationContext context, String topic) {
    this.context = context;
    this.topic = topic;
  }

  static KafkaListenerApplication record(
      SwitchableKeyStore store, SuiteProvider provider, CountDownLatch closing, String topic) {
    return start(store, provider, closing, topic, false);
  }

  static KafkaListenerApplication batch(
      SwitchableKeyStore store, SuiteProvider provider, CountDownLatch closing, String topic) {
    return start(store, provider, closing, topic, true);
  }

  private static KafkaListenerApplication start(
      SwitchableKeyStore store,
      SuiteProvider provider,
      CountDownLatch closing,
      String topic,
      boolean batch) {
    return start(store, provider, closing, topic, String.valueOf(batch), new Class<?>[0]);
  }

  /**
   * An application with {@code suite.kafka.batch=batch} ({@code "none"}: neither of the suite's
   * listeners), {@code sources} added to it and {@code extraProperties} set (probes).
   */
  static KafkaListenerApplication start(
      SwitchableKeyStore store,
      SuiteProvider provider,
      CountDownLatch closing,
      String topic,
      String batch,
      Class<?>[] sources,
      String... extraProperties) {
    ConfigurableApplicationContext context =
        SuiteApplications.application(SuiteKafkaApplication.class, store, provider, closing)
            .sources(sources)
            .defaultProperties(
                SuiteApplications.listenerProperties(
                    new String[] {
                      "spring.kafka.bootstrap-servers=" + EmbeddedKafka.bootstrapServers(),
                      "spring.kafka.consumer.auto-offset-reset=earliest",
                      "suite.kafka.topic=" + topic,
                      "suite.kafka.batch=" + batch
                    },
                    extraProperties))
            .run();
    return new KafkaListenerApplication(context, topic);
  }

  @Override
  @SuppressWarnings("unchecked")
  public void publish(String key, String payload) throws Exception {
    ProducerRecord<String, String> record = new ProducerRecord<>(topic, payload);
    record.headers().add("Idempotency-Key", key.getBytes(StandardCharsets.UTF_8));
    KafkaTemplate<String, String> template = context.getBean(KafkaTemplate.class);
    template.send(record).get(30, TimeUnit.SECONDS);
  }

  /**
   * Publishes each key (its own payload too) in one record batch of the topic, so that any fetch of
   * the listener's consumer gets them all, a batch listener's one batch: a producer of its own that
   * lingers until it is flushed.
   */
  void publishInOneBatch(String... keys) throws Exception {
    publishInOneBatch(keys, keys);
  }

  /** As {@link #publishInOneBatch(String...)}, message {@code i} keyed {@code keys[i]}. */
  @SuppressWarnings("unchecked")
  void publishInOneBatch(String[] keys, String[] payloads) throws Exception {
    Map<String, Object> configs =
        new HashMap<>(context.getBean(ProducerFactory.class).getConfigurationProperties());
    configs.put(ProducerConfig.LINGER_MS_CONFIG, 60_000);
    try (Producer<String, String> producer = new KafkaProducer<>(configs)) {
      List<Future<RecordMetadata>> sent = new ArrayList<>();
      for (int i = 0; i < keys.length; i++) {
        ProducerRecord<String, String> record = new ProducerRecord<>(topic, payloads[i]);
        record.headers().add("Idempotency-Key", keys[i].getBytes(StandardCharsets.UTF_8));
        sent.add(producer.send(record));
      }
      producer.flush();
      for (Future<RecordMetadata> each : sent) {
        each.get(30, TimeUnit.SECONDS);
      }
    }
  }

  @Override
  @SuppressWarnings("unchecked")
  public List<String> deadLettered() {
    ConsumerFactory<String, String> consumers = context.getBean(ConsumerFactory.class);
    TopicPartition partition = new TopicPartition(topic + ".DLT", 0);
    List<String> payloads = new ArrayList<>();
    try (Consumer<String, String> consumer =
        consumers.createConsumer("suite-dlt-reader-" + UUID.randomUUID(), null)) {
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

  /** The group's committed offset reaches the end of the topic. */
  @Override
  public void awaitAcknowledged() throws Exception {
    TopicPartition partition = new TopicPartition(topic, 0);
    try (Admin admin =
        Admin.create(context.getBean(KafkaAdmin.class).getConfigurationProperties())) {
      long end =
          admin
              .listOffsets(Map.of(partition, OffsetSpec.latest()))
              .partitionResult(partition)
              .get(30, TimeUnit.SECONDS)
              .offset();
      Waits.await(
          "the committed offset at " + end,
          () -> {
            try {
              OffsetAndMetadata committed =
                  admin
                      .listConsumerGroupOffsets(topic)
                      .partitionsToOffsetAndMetadata()
                      .get(30, TimeUnit.SECONDS)
                      .get(partition);
              return committed != null && committed.offset() >= end;
            } catch (Exception e) {
              throw new IllegalStateException(e);
            }
          });
    }
  }

  @Override
  public List<String> consumerFailures() {
    return context.getBean(ConsumerFailures.class).seen();
  }

  @Override
  public Events events() {
    return context.getBean(Events.class);
  }

  @Override
  public IdempotencyGuard guard() {
    return context.getBean(IdempotencyGuard.class);
  }

  /** The application's context (probes). */
  ConfigurableApplicationContext context() {
    return context;
  }

  @Override
  public void close() {
    context.close();
  }
}
