package dev.idempotency.redis;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.Batch;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRecord;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.ResultCodec;
import dev.idempotency.testservers.ChildJvm;
import dev.idempotency.testservers.FreePorts;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import redis.embedded.RedisServer;

/**
 * Probe (probeV; SPEC 1) of {@code Batch} on a real Redis from two JVMs at once: each runs several
 * threads that claim overlapping batches of the same 1,500 keys (and single {@code execute} calls
 * on them), send each handed-out key on a pool of sender threads (reports from several threads, as
 * documented), fail about one send in eight (released, retried by a later batch), and call {@code
 * record()} only once every send of the batch reported (the documented usage), until every key is
 * completed. The provider counts its sends per key in Redis ({@code INCR}), shared by both JVMs.
 * What must hold: each key sent exactly once (at most once per window, no lost send), every key
 * {@code COMPLETED} at the end (none left claimed), and no {@code ConcurrentModificationException}
 * (record() never runs while a loop of its batch iterates).
 *
 * <p>Passes on main a8f923a (1/1; e.g. parent 360 batches, 794 batch sends, 114 refused; child 180
 * batches, 640 batch sends: both JVMs sent, 1,500 keys each sent once and completed). About 7 s.
 */
class RedisBatchTwoJvmProbeTest {

  static final int KEYS = 1500;
  static final Duration TTL = Duration.ofHours(1);

  @Test
  void twoJvmsSendEachKeyOnceThroughOverlappingBatches() throws Exception {
    int port = FreePorts.next();
    RedisServer server =
        RedisServer.builder().port(port).setting("bind 127.0.0.1").setting("save \"\"").build();
    server.start();
    String prefix = "probeV-batch:" + UUID.randomUUID() + ":";
    try {
      ChildJvm child =
          ChildJvm.start(RedisBatchTwoJvmProbeTest.class, Integer.toString(port), prefix);
      Map<String, Integer> parent = run(port, prefix, Duration.ofSeconds(120), child::go);
      assertThat(child.waitFor(Duration.ofSeconds(180)))
          .as("the child JVM ended; stderr: %s", child.stderr())
          .isTrue();
      String childSummary = child.output();
      System.out.println("probeV batch race: parent " + parent + "; child " + childSummary);

      try (RedisClient client = RedisClient.create(RedisURI.create("127.0.0.1", port));
          StatefulRedisConnection<String, String> connection = client.connect()) {
        RedisCommands<String, String> redis = connection.sync();
        RedisKeyStore store = RedisKeyStore.builder(client).build();
        try (IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build()) {
          Map<String, String> wrong = new LinkedHashMap<>();
          for (int i = 0; i < KEYS; i++) {
            String key = prefix + i;
            String sends = redis.get("sent:" + key);
            Optional<IdempotencyRecord> record = guard.find(key);
            String state = record.map(r -> r.state().name()).orElse("absent");
            if (!"1".equals(sends) || !state.equals("COMPLETED")) {
              wrong.put(key, "sends " + sends + ", " + state);
            }
          }
          assertThat(wrong)
              .as(
                  "keys not sent exactly once or not completed (parent %s; child %s; stderr %s)",
                  parent, childSummary, child.stderr())
              .isEmpty();
        }
        store.close();
      }
      assertThat(parent.get("concurrentModification")).as("parent %s", parent).isZero();
      assertThat(childSummary).as("child").contains("concurrentModification=0");
      assertThat(child.exitValue())
          .as("child %s; stderr %s", childSummary, child.stderr())
          .isZero();
    } finally {
      server.stop();
    }
  }

  /** The child JVM: the same run; prints its counts. */
  public static void main(String[] args) throws Exception {
    ChildJvm.exitWithCounts(
        run(
            Integer.parseInt(args[0]),
            args[1],
            Duration.ofSeconds(120),
            ChildJvm::readyThenAwaitGo));
  }

  /** Runs the batches of one JVM until every key is completed or {@code within} passed. */
  static Map<String, Integer> run(int port, String prefix, Duration within, Runnable whenReady)
      throws Exception {
    Map<String, AtomicInteger> counts = new ConcurrentHashMap<>();
    for (String name :
        List.of(
            "batches",
            "handedOut",
            "sent",
            "failed",
            "executes",
            "noSuchElement",
            "concurrentModification",
            "errors")) {
      counts.put(name, new AtomicInteger());
    }
    RedisClient client = RedisClient.create(RedisURI.create("127.0.0.1", port));
    StatefulRedisConnection<String, String> provider = client.connect();
    RedisKeyStore store = RedisKeyStore.builder(client).build();
    IdempotencyGuard guard =
        IdempotencyGuard.builder()
            .store(store)
            .lease(Duration.ofSeconds(10))
            .inFlightWait(Duration.ZERO)
            .build();
    ExecutorService senders = Executors.newFixedThreadPool(4);
    ExecutorService loops = Executors.newFixedThreadPool(4);
    guard.find(prefix + 0); // connected
    whenReady.run();
    long deadline = System.nanoTime() + within.toNanos();
    List<Future<?>> running = new ArrayList<>();
    try {
      for (int t = 0; t < 4; t++) {
        boolean singles = t == 3;
        running.add(
            loops.submit(
                () -> {
                  int round = 0;
                  while (System.nanoTime() < deadline
                      && (round++ % 20 != 0 || !allCompleted(guard, prefix))) {
                    try {
                      if (singles) {
                        single(guard, provider, prefix, counts);
                      } else {
                        batch(guard, provider, prefix, senders, counts);
                      }
                    } catch (java.util.ConcurrentModificationException e) {
                      counts.get("concurrentModification").incrementAndGet();
                    } catch (RuntimeException e) {
                      counts.get("errors").incrementAndGet();
                    }
                  }
                  return null;
                }));
      }
      for (Future<?> loop : running) {
        loop.get(within.toSeconds() + 60, TimeUnit.SECONDS);
      }
    } finally {
      loops.shutdownNow();
      senders.shutdown();
      senders.awaitTermination(30, TimeUnit.SECONDS);
      guard.close();
      store.close();
      provider.close();
      client.shutdown();
    }
    Map<String, Integer> result = new LinkedHashMap<>();
    counts.forEach((name, n) -> result.put(name, n.get()));
    return result;
  }

  private static boolean allCompleted(IdempotencyGuard guard, String prefix) {
    for (int i = 0; i < KEYS; i++) {
      Optional<IdempotencyRecord> record = guard.find(prefix + i);
      if (record.isEmpty() || !record.get().state().name().equals("COMPLETED")) {
        return false;
      }
    }
    return true;
  }

  /** The provider: counts the send in Redis; about one send in eight fails before it is made. */
  private static String send(
      StatefulRedisConnection<String, String> provider, String key, AtomicInteger failed) {
    if (ThreadLocalRandom.current().nextInt(8) == 0) {
      failed.incrementAndGet();
      throw new IllegalStateException("the provider refused (nothing sent)");
    }
    long n = provider.sync().incr("sent:" + key);
    return "sent-" + key + "-" + n;
  }

  private static List<IdempotencyRequest> someKeys(String prefix) {
    List<Integer> all = new ArrayList<>();
    for (int i = 0; i < KEYS; i++) {
      all.add(i);
    }
    Collections.shuffle(all);
    List<IdempotencyRequest> requests = new ArrayList<>();
    for (int i : all.subList(0, 25)) {
      requests.add(IdempotencyRequest.of(prefix + i, TTL));
    }
    return requests;
  }

  private static void single(
      IdempotencyGuard guard,
      StatefulRedisConnection<String, String> provider,
      String prefix,
      Map<String, AtomicInteger> counts) {
    String key = prefix + ThreadLocalRandom.current().nextInt(KEYS);
    counts.get("executes").incrementAndGet();
    try {
      guard.execute(key, TTL, ctx -> send(provider, key, counts.get("failed")));
    } catch (RuntimeException expected) {
      // in progress elsewhere, or the provider refused: a later call retries
    }
  }

  private static void batch(
      IdempotencyGuard guard,
      StatefulRedisConnection<String, String> provider,
      String prefix,
      ExecutorService senders,
      Map<String, AtomicInteger> counts)
      throws Exception {
    counts.get("batches").incrementAndGet();
    try (Batch<String> batch = guard.claimBatch(someKeys(prefix), ResultCodec.string())) {
      List<Future<?>> sends = new ArrayList<>();
      try {
        for (Batch.Item item : batch.toSend()) {
          counts.get("handedOut").incrementAndGet();
          sends.add(
              senders.submit(
                  () -> {
                    try {
                      String receipt = send(provider, item.key(), counts.get("failed"));
                      batch.succeeded(item, receipt);
                      counts.get("sent").incrementAndGet();
                    } catch (IllegalStateException refused) {
                      batch.failed(item, refused);
                    }
                  }));
        }
      } catch (NoSuchElementException lapsed) {
        counts.get("noSuchElement").incrementAndGet();
      }
      for (Future<?> send : sends) {
        send.get(60, TimeUnit.SECONDS);
      }
      batch.record();
    }
  }
}
