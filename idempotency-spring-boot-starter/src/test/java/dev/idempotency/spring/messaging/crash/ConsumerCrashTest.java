package dev.idempotency.spring.messaging.crash;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.redis.RedisKeyStore;
import dev.idempotency.spring.EmbeddedServers;
import dev.idempotency.spring.messaging.EmbeddedKafka;
import dev.idempotency.testservers.Poll;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A consumer killed (SIGKILL) in the middle of a batch, after the provider accepted three of its
 * five messages and before any outcome was recorded; a second consumer process of the same group
 * gets the batch again from Kafka. Every message is sent; the three of the crash window are sent
 * again once their lease has run out, at attempt 2 and with the first attempt's provider key, so a
 * provider that deduplicates delivers each message once. On a real Kafka broker and a real Redis.
 */
class ConsumerCrashTest {

  static final int BATCH = 5;
  static final int CRASH_AFTER = 3;

  @Test
  void aConsumerKilledMidBatchIsRedeliveredAndEachMessageIsSentOnceByProviderKey(@TempDir Path dir)
      throws Exception {
    String bootstrap = EmbeddedKafka.bootstrapServers();
    int redisPort = EmbeddedServers.redisPort();
    Path providerLog = dir.resolve("provider.log");
    String run = UUID.randomUUID().toString().substring(0, 8);
    List<String> events = new ArrayList<>();
    for (int i = 1; i <= BATCH; i++) {
      events.add("crash-" + run + "-" + i);
    }

    publish(bootstrap, events); // before the consumer starts: its first poll gets the whole batch
    try (Child first =
        new Child(
            dir,
            "crash",
            bootstrap,
            Integer.toString(redisPort),
            providerLog.toString(),
            Integer.toString(CRASH_AFTER))) {
      first.await("SENT " + CRASH_AFTER, 180);
      first.kill();
    }
    assertThat(lines(providerLog)).hasSize(CRASH_AFTER);

    try (Child second =
        new Child(dir, "finish", bootstrap, Integer.toString(redisPort), providerLog.toString())) {
      second.await("STARTED", 180);
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
      while (lines(providerLog).size() < BATCH + CRASH_AFTER) {
        assertThat(System.nanoTime()).as("every message sent after the crash").isLessThan(deadline);
        Thread.sleep(100);
      }
      // each outcome is recorded: a repeat through the store is a replay
      IdempotencyGuard guard = redisGuard(redisPort);
      for (String event : events) {
        awaitReplay(guard, IdempotencyKey.of(CrashingConsumer.LISTENER, event));
      }
      // and the batch acknowledged: Kafka delivers none of it again, so no send can follow (this
      // wait replaced a fixed 1 s, which only watched for one)
      awaitCommitted(bootstrap);
    }

    List<String[]> sends = lines(providerLog).stream().map(line -> line.split(" ")).toList();
    assertThat(sends).hasSize(BATCH + CRASH_AFTER);
    Map<String, List<String[]>> byEvent =
        sends.stream().collect(Collectors.groupingBy(send -> send[2]));
    assertThat(byEvent.keySet()).containsExactlyInAnyOrderElementsOf(events);
    for (int i = 0; i < BATCH; i++) {
      String event = events.get(i);
      String providerKey =
          IdempotencyKey.providerKey(IdempotencyKey.of(CrashingConsumer.LISTENER, event));
      List<String> attempts = byEvent.get(event).stream().map(send -> send[1]).toList();
      if (i < CRASH_AFTER) {
        assertThat(attempts)
            .as("sent in the crash window: again at attempt 2")
            .containsExactly("1", "2");
      } else {
        // claimed with the batch but never sent: taken over at attempt 2, sent once
        assertThat(attempts).as("not reached before the crash: sent once").containsExactly("2");
      }
      assertThat(byEvent.get(event))
          .as("every send of a message carries its provider key")
          .allSatisfy(send -> assertThat(send[0]).isEqualTo(providerKey));
    }
    assertThat(sends.stream().map(send -> send[0]).distinct())
        .as("a provider that deduplicates by provider key delivers each message once")
        .hasSize(BATCH);
  }

  private static void publish(String bootstrap, List<String> events) throws Exception {
    try (KafkaProducer<String, String> producer =
        new KafkaProducer<>(
            Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap),
            new StringSerializer(),
            new StringSerializer())) {
      for (String event : events) {
        producer.send(new ProducerRecord<>(CrashingConsumer.TOPIC, event));
      }
      producer.flush();
    }
  }

  /**
   * Waits until the consumers' group committed every message of the topic. The group is the
   * listener's id, as Spring Kafka makes it when the listener names no group ({@code idIsGroup}).
   */
  private static void awaitCommitted(String bootstrap) throws Exception {
    try (Admin admin =
        Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
      TopicPartition partition = new TopicPartition(CrashingConsumer.TOPIC, 0);
      long end =
          admin
              .listOffsets(Map.of(partition, OffsetSpec.latest()))
              .partitionResult(partition)
              .get(30, TimeUnit.SECONDS)
              .offset();
      assertThat(end).as("the topic's end offset").isGreaterThanOrEqualTo(BATCH);
      Poll.within(Duration.ofSeconds(60))
          .until(
              "the group's committed offset at " + end,
              () -> {
                OffsetAndMetadata committed =
                    admin
                        .listConsumerGroupOffsets(CrashingConsumer.LISTENER)
                        .partitionsToOffsetAndMetadata()
                        .get(30, TimeUnit.SECONDS)
                        .get(partition);
                return committed == null ? -1L : committed.offset();
              },
              offset -> offset >= end);
    }
  }

  private static IdempotencyGuard redisGuard(int port) {
    RedisClient client = RedisClient.create(RedisURI.create("redis://127.0.0.1:" + port));
    // a generous first connection: the store's default 5 s ran out once on the loaded 2-core
    // machine (load average 35), failing the check after every send had been made
    return IdempotencyGuard.builder()
        .store(RedisKeyStore.builder(client).connectionWait(Duration.ofSeconds(60)).build())
        .lease(Duration.ofSeconds(3))
        .inFlightWait(Duration.ZERO)
        .build();
  }

  private static void awaitReplay(IdempotencyGuard guard, String key) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (true) {
      try {
        guard.execute(
            key,
            Duration.ofHours(24),
            context -> {
              throw new AssertionError("the key was not recorded: the parent would send it");
            });
        return;
      } catch (dev.idempotency.IdempotencyInProgressException stillRecording) {
        assertThat(System.nanoTime()).isLessThan(deadline);
        Thread.sleep(100);
      }
    }
  }

  private static List<String> lines(Path file) throws IOException {
    return Files.exists(file) ? Files.readAllLines(file, StandardCharsets.UTF_8) : List.of();
  }

  /** A second JVM running {@link CrashingConsumer} with this test's classpath. */
  static final class Child implements AutoCloseable {
    private final Process process;
    private final BufferedReader out;
    private final Path stderr;

    Child(Path dir, String... args) throws IOException {
      stderr = Files.createTempFile(dir, "child", ".err");
      List<String> command = new ArrayList<>();
      command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
      command.add("-Xmx384m");
      // a short-lived Spring Boot consumer: C1 and the serial collector start it sooner on two
      // cores (as the reliability module's children); what it tests does not depend on them
      command.add("-XX:TieredStopAtLevel=1");
      command.add("-XX:+UseSerialGC");
      command.add("-cp");
      command.add(System.getProperty("java.class.path"));
      command.add(CrashingConsumer.class.getName());
      command.addAll(List.of(args));
      process = new ProcessBuilder(command).redirectError(stderr.toFile()).start();
      out =
          new BufferedReader(
              new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
    }

    void await(String expected, long seconds) throws Exception {
      CompletableFuture<Boolean> seen =
          CompletableFuture.supplyAsync(
              () -> {
                try {
                  String line;
                  while ((line = out.readLine()) != null) {
                    if (line.equals(expected)) {
                      return true;
                    }
                  }
                  return false;
                } catch (IOException e) {
                  return false;
                }
              });
      if (!seen.get(seconds, TimeUnit.SECONDS)) {
        throw new AssertionError("the child ended without printing " + expected + "; " + stderr());
      }
    }

    void kill() {
      process.destroyForcibly();
      try {
        process.waitFor(30, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }

    private String stderr() {
      try {
        String text = Files.readString(stderr);
        return text.length() > 4_000 ? text.substring(text.length() - 4_000) : text;
      } catch (IOException e) {
        return "stderr unreadable";
      }
    }

    @Override
    public void close() {
      kill();
    }
  }
}
