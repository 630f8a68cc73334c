package dev.idempotency.reliability;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.SendContext;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The other process of the fault tests.
 *
 * <ul>
 *   <li>{@code crash-before-record SPEC KEY LEASE_MS PROVIDER_LOG}: claims the key, "sends"
 *       (appends the provider key to the provider log, synced), prints {@code SENT} and hangs until
 *       killed, so the outcome is never recorded;
 *   <li>{@code crash-after-record SPEC KEY PROVIDER_LOG}: sends and records, prints {@code
 *       RECORDED} and hangs until killed;
 *   <li>{@code load SPEC KEYS_FILE THREADS OUT_FILE SEED}: prints {@code READY}, waits for {@code
 *       GO}, then calls the guard for every key of a shuffled work list and writes what it sent and
 *       what every call returned;
 *   <li>{@code batch SPEC KEYS_FILE OUT_FILE}: prints {@code READY}, waits for {@code GO}, claims
 *       the keys as batches (retrying keys in flight until they are replayed) and writes the keys
 *       it sent;
 *   <li>{@code renewed-sends SPEC SLOW_KEY HUNG_KEY LEASE_MS SLOW_MS}: sends both keys at once with
 *       a short lease, renewed in the background: the first send takes {@code SLOW_MS} and returns
 *       {@code n_child_slow}, the second never returns. Prints {@code SENDING} once both run and
 *       {@code SLOW-DONE} once the first is recorded, then hangs until killed.
 * </ul>
 */
public final class ReliabilityChild {

  static final Duration TTL = Duration.ofHours(1);

  private ReliabilityChild() {}

  /**
   * Runs one mode.
   *
   * @param args the mode and its arguments
   * @throws Exception on failure (non-zero exit)
   */
  public static void main(String[] args) throws Exception {
    switch (args[0]) {
      case "crash-before-record" -> crashBeforeRecord(args);
      case "crash-after-record" -> crashAfterRecord(args);
      case "load" -> load(args);
      case "batch" -> batch(args);
      case "renewed-sends" -> renewedSends(args);
      default -> throw new IllegalArgumentException(args[0]);
    }
  }

  private static void crashBeforeRecord(String[] args) throws Exception {
    IdempotencyGuard guard =
        IdempotencyGuard.builder()
            .store(Stores.open(args[1], 2))
            .lease(Duration.ofMillis(Long.parseLong(args[3])))
            .build();
    Path providerLog = Path.of(args[4]);
    guard.execute(
        args[2],
        TTL,
        ctx -> {
          providerSend(providerLog, ctx);
          System.out.println("SENT");
          System.out.flush();
          Thread.sleep(Long.MAX_VALUE); // killed here: the outcome is never recorded
          return "unreachable";
        });
  }

  private static void crashAfterRecord(String[] args) throws Exception {
    IdempotencyGuard guard = IdempotencyGuard.builder().store(Stores.open(args[1], 2)).build();
    Path providerLog = Path.of(args[3]);
    guard.execute(
        args[2],
        TTL,
        ctx -> {
          providerSend(providerLog, ctx);
          return "n_child";
        });
    System.out.println("RECORDED");
    System.out.flush();
    Thread.sleep(Long.MAX_VALUE);
  }

  private static void renewedSends(String[] args) throws Exception {
    IdempotencyGuard guard =
        IdempotencyGuard.builder()
            .store(Stores.open(args[1], 4))
            .lease(Duration.ofMillis(Long.parseLong(args[4])))
            .build();
    long slowMillis = Long.parseLong(args[5]);
    java.util.concurrent.CountDownLatch sending = new java.util.concurrent.CountDownLatch(2);
    ExecutorService pool = Executors.newFixedThreadPool(2);
    Future<String> slow =
        pool.submit(
            () ->
                guard.execute(
                    args[2],
                    TTL,
                    ctx -> {
                      sending.countDown();
                      Thread.sleep(slowMillis); // a slow provider call, five leases long
                      return "n_child_slow";
                    }));
    pool.submit(
        () ->
            guard.execute(
                args[3],
                TTL,
                ctx -> {
                  sending.countDown();
                  Thread.sleep(Long.MAX_VALUE); // a provider call that never returns
                  return "unreachable";
                }));
    sending.await();
    System.out.println("SENDING");
    System.out.flush();
    slow.get();
    System.out.println("SLOW-DONE");
    System.out.flush();
    Thread.sleep(Long.MAX_VALUE); // killed here, with the second send still renewed
  }

  /** The provider: an append-only log of provider keys, synced, shared by every process. */
  static void providerSend(Path log, SendContext ctx) throws IOException {
    byte[] line =
        (ctx.providerKey() + " attempt=" + ctx.attempt() + "\n").getBytes(StandardCharsets.UTF_8);
    try (FileChannel channel =
        FileChannel.open(
            log, StandardOpenOption.CREATE, StandardOpenOption.APPEND, StandardOpenOption.WRITE)) {
      channel.write(ByteBuffer.wrap(line));
      channel.force(true);
    }
  }

  private static void load(String[] args) throws Exception {
    int threads = Integer.parseInt(args[3]);
    IdempotencyGuard guard =
        IdempotencyGuard.builder()
            .store(Stores.open(args[1], threads))
            .inFlightWait(Duration.ofSeconds(60))
            .build();
    List<String> keys = Files.readAllLines(Path.of(args[2]), StandardCharsets.UTF_8);
    Random random = new Random(Long.parseLong(args[5]));
    List<String> work = new ArrayList<>(keys);
    for (int i = 0; i < keys.size() / 10; i++) {
      String hot = keys.get(i);
      for (int r = 0; r < 5; r++) {
        work.add(hot); // 10% of the keys are repeated many times
      }
    }
    Collections.shuffle(work, random);
    String pid = Long.toString(ProcessHandle.current().pid());
    ConcurrentLinkedQueue<String> lines = new ConcurrentLinkedQueue<>();
    AtomicInteger next = new AtomicInteger();

    System.out.println("READY");
    System.out.flush();
    BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    if (!"GO".equals(in.readLine())) {
      throw new IllegalStateException("expected GO");
    }
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    List<Future<?>> futures = new ArrayList<>();
    for (int t = 0; t < threads; t++) {
      futures.add(
          pool.submit(
              () -> {
                int i;
                while ((i = next.getAndIncrement()) < work.size()) {
                  String key = work.get(i);
                  String result =
                      guard.execute(
                          key,
                          TTL,
                          ctx -> {
                            String sent =
                                pid + "-" + Thread.currentThread().getId() + "-" + ctx.attempt();
                            lines.add("S " + key + " " + sent);
                            return sent;
                          });
                  lines.add("R " + key + " " + result);
                }
                return null;
              }));
    }
    for (Future<?> future : futures) {
      future.get(10, TimeUnit.MINUTES);
    }
    pool.shutdown();
    Files.write(Path.of(args[4]), lines, StandardCharsets.UTF_8);
    System.out.println("DONE");
    System.out.flush();
    System.exit(0);
  }

  private static void batch(String[] args) throws Exception {
    IdempotencyGuard guard = IdempotencyGuard.builder().store(Stores.open(args[1], 4)).build();
    List<String> keys = Files.readAllLines(Path.of(args[2]), StandardCharsets.UTF_8);
    System.out.println("READY");
    System.out.flush();
    BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    if (!"GO".equals(in.readLine())) {
      throw new IllegalStateException("expected GO");
    }
    Files.write(Path.of(args[3]), BatchRun.sendAll(guard, keys), StandardCharsets.UTF_8);
    System.out.println("DONE");
    System.out.flush();
    System.exit(0);
  }
}
