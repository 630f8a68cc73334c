package dev.idempotency.reliability;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.Batch;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.ResultCodec;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.api.parallel.Isolated;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Batches of 10,000 keys, overlapping batches from two processes, and async calls under load.
 *
 * <p>{@code @Isolated}: it counts the JVM's threads, which another test class running beside it
 * would add to.
 */
@Isolated
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class BatchAndAsyncTest {

  RestartablePostgres postgres;
  RestartableRedis redis;

  @BeforeAll
  void start() throws Exception {
    postgres = new RestartablePostgres();
    redis = new RestartableRedis(false);
  }

  @AfterAll
  void stop() throws Exception {
    postgres.close();
    redis.close();
  }

  Stream<Arguments> stores() {
    return Stream.of(
        Arguments.of("postgresql", postgres.url()), Arguments.of("redis", redis.uri()));
  }

  static List<String> keys(int count) {
    String run = UUID.randomUUID().toString().substring(0, 8);
    List<String> keys = new ArrayList<>();
    for (int i = 0; i < count; i++) {
      keys.add("campaign:" + run + ":" + i);
    }
    return keys;
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("stores")
  void batchOfTenThousandWithTenPercentSentClaimsExactlyTheOtherNinety(String name, String spec) {
    IdempotencyGuard guard = IdempotencyGuard.builder().store(Stores.open(spec, 4)).build();
    List<String> keys = keys(10_000);
    Set<String> early = new HashSet<>();
    for (int i = 0; i < keys.size(); i += 10) {
      guard.execute(keys.get(i), ReliabilityChild.TTL, ctx -> "early");
      early.add(keys.get(i));
    }
    List<IdempotencyRequest> requests =
        keys.stream().map(k -> IdempotencyRequest.of(k, ReliabilityChild.TTL)).toList();

    long start = System.nanoTime();
    Batch<String> batch = guard.claimBatch(requests, ResultCodec.string());
    batch.toSend().forEach(item -> batch.succeeded(item, "n"));
    Batch.Recorded recorded = batch.record();
    long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
    Batch<String> repeat = guard.claimBatch(requests, ResultCodec.string());

    System.out.printf(
        "%s: batch of 10,000 (9,000 new) claimed and recorded in %d ms%n", name, millis);
    assertThat(batch.claimedKeys()).hasSize(9_000).noneMatch(early::contains);
    assertThat(batch.replayed().keySet()).isEqualTo(early);
    assertThat(recorded.completed()).isEqualTo(9_000);
    assertThat(repeat.toSend()).isEmpty();
    assertThat(repeat.replayed()).hasSize(10_000);
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("stores")
  void twoProcessesWithOverlappingBatchesSendEachKeyOnce(
      String name, String spec, @TempDir Path dir) throws Exception {
    List<String> keys = keys(6_000);
    Path childKeys = dir.resolve("child-keys.txt");
    Path childOut = dir.resolve("child-out.txt");
    // The child goes backwards from key 3,999, the parent forwards from key 2,000: both start in
    // the overlap, so they really race for it.
    List<String> childOrder = new ArrayList<>(keys.subList(0, 4_000));
    java.util.Collections.reverse(childOrder);
    Files.write(childKeys, childOrder, StandardCharsets.UTF_8);
    IdempotencyGuard guard = IdempotencyGuard.builder().store(Stores.open(spec, 4)).build();

    List<String> parentSent;
    try (ChildJvm child =
        new ChildJvm(dir, "batch", spec, childKeys.toString(), childOut.toString())) {
      child.await("READY", 180);
      Writer in = new OutputStreamWriter(child.process.getOutputStream(), StandardCharsets.UTF_8);
      in.write("GO\n");
      in.flush();
      parentSent = BatchRun.sendAll(guard, keys.subList(2_000, 6_000));
      child.awaitExit(300);
    }
    List<String> childSent = Files.readAllLines(childOut, StandardCharsets.UTF_8);

    Set<String> both = new HashSet<>(parentSent);
    both.retainAll(childSent);
    Set<String> all = new HashSet<>(parentSent);
    all.addAll(childSent);
    System.out.printf(
        "%s: overlapping batches, parent sent %d, child sent %d%n",
        name, parentSent.size(), childSent.size());
    assertThat(both).as("keys sent by both processes").isEmpty();
    assertThat(all).containsExactlyInAnyOrderElementsOf(keys);
    assertThat(parentSent.size() + childSent.size()).isEqualTo(6_000);
  }

  @Test
  void tenThousandConcurrentAsyncCallsOnRedisNeedOnlyAFewThreads() throws Exception {
    IdempotencyGuard guard = IdempotencyGuard.builder().store(Stores.open(redis.uri(), 1)).build();
    ThreadMXBean threads = ManagementFactory.getThreadMXBean();
    guard
        .executeAsync(
            "warm:" + UUID.randomUUID(),
            ReliabilityChild.TTL,
            ctx -> CompletableFuture.completedFuture("w"))
        .toCompletableFuture()
        .get(30, TimeUnit.SECONDS);
    int before = threads.getThreadCount();
    threads.resetPeakThreadCount();
    List<String> keys = keys(10_000);
    ConcurrentHashMap<String, Integer> sends = new ConcurrentHashMap<>();
    CompletableFuture<Void> slowProvider = new CompletableFuture<>();

    List<CompletableFuture<String>> calls = new ArrayList<>();
    for (String key : keys) {
      calls.add(
          guard
              .executeAsync(
                  key,
                  ReliabilityChild.TTL,
                  ctx -> {
                    sends.merge(key, 1, Integer::sum);
                    return slowProvider.thenApply(ignored -> "n:" + key);
                  })
              .toCompletableFuture());
    }
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (sends.size() < keys.size() && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    int inFlight = sends.size();
    slowProvider.complete(null);
    for (int i = 0; i < keys.size(); i++) {
      assertThat(calls.get(i).get(60, TimeUnit.SECONDS)).isEqualTo("n:" + keys.get(i));
    }
    int peak = threads.getPeakThreadCount();

    System.out.printf(
        "async: %d calls in flight at once, threads %d before, peak %d%n", inFlight, before, peak);
    assertThat(inFlight).as("all calls were in flight together").isEqualTo(10_000);
    assertThat(sends.values()).allMatch(count -> count == 1);
    assertThat(peak - before).as("threads added for 10,000 concurrent calls").isLessThan(16);
  }
}
