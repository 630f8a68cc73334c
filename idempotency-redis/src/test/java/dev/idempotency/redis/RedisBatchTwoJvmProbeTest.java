package dev.idempotency.redis;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.Batch;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRecord;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.ResultCodec;
import dev.idempotency.testservers.FreePorts;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
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
    Path dir = Files.createTempDirectory("probeV-batch");
    String prefix = "probeV-batch:" + UUID.randomUUID() + ":";
    try {
      String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
      Process child =
          new ProcessBuilder(
                  java,
                  "-cp",
                  System.getProperty("java.class.path"),
                  RedisBatchTwoJvmProbeTest.class.getName(),
                  Integer.toString(port),
                  prefix)
              .redirectError(dir.resolve("child-stderr.txt").toFile())
              .start();
      BufferedReader childOut =
          new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8));
      Map<String, Integer> parent =
          run(
              port,
              prefix,
              Duration.ofSeconds(120),
              () -> {
                try {
                  String ready = childOut.readLine();
                  if (!"READY".equals(ready)) {
                    throw new IllegalStateException(
                        "the child said " + ready + "; stderr: " + stderr(dir));
                  }
                  child.getOutputStream().write("GO\n".getBytes(StandardCharsets.UTF_8));
                  child.getOutputStream().flush();
                } catch (java.io.IOException e) {
                  throw new java.io.UncheckedIOException(e);
                }
              });
      assertThat(child.waitFor(180, TimeUnit.SECONDS))
          .as("the child JVM ended; stderr: %s", stderr(dir))
          .isTrue();
      List<String> childLines = childOut.lines().toList();
      String childSummary = String.join("\n", childLines);
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
                  parent, childSummary, stderr(dir))
              .isEmpty();
        }
        store.close();
      }
      assertThat(parent.get("concurrentModification")).as("parent %s", parent).isZero();
      assertThat(childSummary).as("child").contains("concurrentModification=0");
      assertThat(child.exitValue()).as("child %s; stderr %s", childSummary, stderr(dir)).isZero();
    } finally {
      server.stop();
    }
  }

  private static String stderr(Path dir) {
    try {
      String text = Files.readString(dir.resolve("child-stderr.txt"));
      return text.length() > 4000 ? text.substring(text.length() - 4000) : text;
    } catch (Exception e) {
      return "(none: " + e + ")";
    }
  }

  /** The child JVM: the same run; prints its counts. */
  public static void main(String[] args) throws Exception {
    Map<String, Integer> counts =
        run(
            Integer.parseInt(args[0]),
            args[1],
            Duration.ofSeconds(120),
            () -> {
              System.out.println("READY");
              System.out.flush();
              try {
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))
                    .readLine();
              } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
              }
            });
    StringBuilder line = new StringBuilder();
    counts.forEach((name, n) -> line.append(name).append('=').append(n).append(' '));
    System.out.println(line.toString().trim());
    System.exit(0);
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
