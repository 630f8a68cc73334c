package dev.idempotency.reliability;

import dev.idempotency.AsyncSender;
import dev.idempotency.Batch;
import dev.idempotency.IdempotencyException;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.IdempotencyKeyReuseException;
import dev.idempotency.IdempotencyOutcomeUnknownException;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.IdempotencyResultUnavailableException;
import dev.idempotency.IdempotencyStoredFailureException;
import dev.idempotency.KeyStoreException;
import dev.idempotency.Outcome;
import dev.idempotency.ResultCodec;
import dev.idempotency.SendContext;
import dev.idempotency.SendFailedException;
import dev.idempotency.reliability.FaultHistory.Call;
import dev.idempotency.reliability.FaultHistory.Fault;
import dev.idempotency.reliability.FaultHistory.Send;
import dev.idempotency.spi.AsyncKeyStore;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.ForwardingKeyStore;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One client process of a fault run: many threads calling {@code execute}, {@code
 * executeForOutcomeAsync} and batches over a shared key space with hot keys, through a fake
 * provider that logs every send it accepts (synced) and sometimes takes longer than the lease or
 * fails, transiently or for good, or returns on an interrupted thread (as after a {@code
 * Future.cancel(true)} that came as the provider call finished). Every fifth key has a window
 * shorter than the slowest sends. It keeps its guard's blocking-store executor busy now and then,
 * jumps its guard's wall clock (on a client-time store: forward only, and only in even-numbered
 * processes, see {@link #CLIENT_TIME}), and writes every call's outcome. It runs until the file
 * {@code stop} appears in its directory.
 *
 * <p>The key space slides: every 100 ms a new key enters it and the oldest leaves, so that keys are
 * sent (and faults land on sends) all through the run, not only in its first seconds. Half of the
 * calls go to the newest keys (hot), half to any key of the window.
 *
 * <p>Arguments: {@code SPEC DIR PROCESS SEED LEASE_MS KEYS HOT_KEYS THREADS BREAK START_MS}, where
 * {@code KEYS} is the window's size, {@code START_MS} the run's start, and BREAK is {@code none} or
 * {@code no-renewal} (a store whose lease renewals silently do nothing: the deliberately broken
 * build the checker must catch).
 */
public final class FaultRunChild {

  static final Duration TTL = Duration.ofHours(1);

  /**
   * A spec prefix for a JDBC store on the guard's clock instead of the database's: the processes
   * with an even number move their clocks ahead of the true time (never behind it) and back, the
   * others never move theirs. A clock behind the others' would shorten the leases it writes, which
   * a store on client time cannot absorb (that is clock skew; use database time against it).
   */
  static final String CLIENT_TIME = "clienttime:";

  /** Every fifth key's window, shorter than the slowest sends (1.5 to 2.5 leases). */
  static Duration windowOf(String key, long leaseMillis) {
    return isShortWindow(key) ? Duration.ofMillis(leaseMillis * 2) : TTL;
  }

  static boolean isShortWindow(String key) {
    return key.matches("fault-key-\\d+")
        && Long.parseLong(key.substring(key.lastIndexOf('-') + 1)) % 5 == 0;
  }

  /**
   * The most a client-time process's clock is moved ahead of the true time ({@link #jumpClock}:
   * half a lease plus up to four): a takeover by such a clock saw a lease as ended at most this
   * long before it truly ended.
   */
  static long maxClockAheadMillis(long leaseMillis) {
    return leaseMillis / 2 + leaseMillis * 4;
  }

  /** A provider rejection that the guard's classifier calls permanent. */
  static final class PermanentRejection extends Exception {
    PermanentRejection(String message) {
      super(message);
    }
  }

  private final IdempotencyGuard guard;
  private final int process;
  private final long leaseMillis;
  private final int keys;
  private final int hotKeys;
  private final Path dir;
  private final long startMillis;
  private final FileChannel sendLog;
  private final FileChannel callLog;
  private final FileChannel faultLog;
  private final AtomicLong results = new AtomicLong();
  private final AtomicLong clockOffset = new AtomicLong();
  private final boolean clientTime;
  private final ExecutorService storeExecutor = Executors.newFixedThreadPool(4);

  private FaultRunChild(String[] args) throws IOException {
    String spec = args[0];
    clientTime = spec.startsWith(CLIENT_TIME);
    dir = Path.of(args[1]);
    process = Integer.parseInt(args[2]);
    leaseMillis = Long.parseLong(args[4]);
    keys = Integer.parseInt(args[5]);
    hotKeys = Integer.parseInt(args[6]);
    startMillis = Long.parseLong(args[9]);
    sendLog = open("sends-" + process + ".log");
    callLog = open("calls-" + process + ".log");
    faultLog = open("faults-" + process + ".log");
    KeyStore store = openRetrying(spec, 8);
    if (!(store instanceof AsyncKeyStore)) {
      // a wrapper would hide an async store's own face (Redis), and change the calls it makes
      store = new StoreCallLog(store, process, leaseMillis, open("store-" + process + ".log"));
    }
    if (args[8].equals("no-renewal")) {
      store = new RenewalDroppingStore(store);
    }
    guard =
        IdempotencyGuard.builder()
            .store(store)
            .lease(Duration.ofMillis(leaseMillis))
            .inFlightWait(Duration.ofMillis(300))
            .failureClassifier(failure -> failure instanceof PermanentRejection)
            .clock(jumpingClock())
            .blockingStoreExecutor(storeExecutor)
            .build();
  }

  /**
   * Opens the store, trying again for up to two minutes: a client started while the store restarts
   * or the network is cut keeps trying, as a supervised service would.
   */
  static KeyStore openRetrying(String spec, int poolSize) {
    long deadline = System.nanoTime() + TimeUnit.MINUTES.toNanos(2);
    while (true) {
      try {
        return Stores.open(spec, poolSize);
      } catch (RuntimeException e) {
        if (System.nanoTime() > deadline) {
          throw e;
        }
        System.err.println("store not reachable yet, trying again: " + e);
        try {
          Thread.sleep(500);
        } catch (InterruptedException interrupted) {
          Thread.currentThread().interrupt();
          throw e;
        }
      }
    }
  }

  /**
   * Runs the process.
   *
   * @param args see the class documentation
   * @throws Exception if it cannot start
   */
  public static void main(String[] args) throws Exception {
    FaultRunChild child = new FaultRunChild(args);
    long seed = Long.parseLong(args[3]);
    int threads = Integer.parseInt(args[7]);
    System.out.println("READY");
    System.out.flush();
    Files.createFile(child.dir.resolve("ready-" + child.process));
    ExecutorService pool = Executors.newFixedThreadPool(threads + 2);
    for (int t = 0; t < threads; t++) {
      Random random = new Random(seed * 1_000 + t);
      pool.submit(() -> child.work(random));
    }
    pool.submit(() -> child.jumpClock(new Random(seed * 1_000 - 1)));
    pool.submit(() -> child.hogStoreExecutor(new Random(seed * 1_000 - 2)));
    Thread stalls = new Thread(child::watchForStalls, "stall-watch");
    stalls.setDaemon(true);
    stalls.start();
    pool.shutdown();
    if (!pool.awaitTermination(10, TimeUnit.MINUTES)) {
      System.exit(3);
    }
    System.out.println("DONE");
    System.out.flush();
    System.exit(0);
  }

  private boolean stopping() {
    return Files.exists(dir.resolve("stop"));
  }

  /**
   * Waits {@code millis}, or less if the run is told to stop meanwhile: the fault threads wait
   * seconds between faults, and the run should not wait for them to notice its end.
   *
   * @return whether the run is stopping
   */
  private boolean restUnlessStopping(long millis) throws InterruptedException {
    long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
    for (long left = millis;
        left > 0;
        left = TimeUnit.NANOSECONDS.toMillis(end - System.nanoTime())) {
      if (stopping()) {
        return true;
      }
      Thread.sleep(Math.min(left, 100));
    }
    return stopping();
  }

  private Void work(Random random) {
    while (!stopping()) {
      int op = random.nextInt(100);
      try {
        if (op < 55) {
          execute(random);
        } else if (op < 80) {
          executeAsync(random);
        } else {
          batch(random);
        }
      } catch (RuntimeException | IOException unexpected) {
        unexpected.printStackTrace();
      }
      Thread.interrupted(); // a sender may have returned on an interrupted thread: go on
    }
    return null;
  }

  private String key(Random random) {
    long base = (System.currentTimeMillis() - startMillis) / KEY_EVERY_MILLIS;
    int offset = random.nextInt(2) == 0 ? keys - 1 - random.nextInt(hotKeys) : random.nextInt(keys);
    return keyName(base + offset);
  }

  /** A new key enters the window this often. */
  static final long KEY_EVERY_MILLIS = 100;

  static String keyName(long index) {
    return "fault-key-" + index;
  }

  private void execute(Random random) throws IOException {
    String key = key(random);
    try {
      Outcome<String> outcome =
          guard.executeForOutcome(
              IdempotencyRequest.of(key, windowOf(key, leaseMillis)),
              ResultCodec.string(),
              ctx -> send(ctx, random));
      logCall(key, "execute", outcome);
    } catch (RuntimeException e) {
      logCall(new Call(key, "execute", process, name(e), null, false, System.currentTimeMillis()));
      backOff(e);
    }
  }

  private void executeAsync(Random random) throws IOException {
    String key = key(random);
    try {
      var pending =
          guard
              .executeForOutcomeAsync(
                  IdempotencyRequest.of(key, windowOf(key, leaseMillis)),
                  ResultCodec.string(),
                  AsyncSender.of(ctx -> send(ctx, random)))
              .toCompletableFuture();
      Outcome<String> outcome;
      while (true) {
        try {
          outcome = pending.get(2, TimeUnit.MINUTES);
          break;
        } catch (InterruptedException senderInterruptedThisThread) {
          // the sender ran on this thread and returned interrupted: wait on for the outcome
        }
      }
      logCall(key, "async", outcome);
    } catch (java.util.concurrent.ExecutionException e) {
      logCall(
          new Call(
              key, "async", process, name(e.getCause()), null, false, System.currentTimeMillis()));
      backOff(e.getCause());
    } catch (java.util.concurrent.TimeoutException e) {
      logCall(new Call(key, "async", process, "TIMEOUT", null, false, System.currentTimeMillis()));
    }
  }

  private void batch(Random random) throws IOException {
    Set<String> chosen = new LinkedHashSet<>();
    int size = 3 + random.nextInt(8);
    while (chosen.size() < size) {
      chosen.add(key(random));
    }
    List<IdempotencyRequest> requests = new ArrayList<>();
    for (String key : chosen) {
      requests.add(IdempotencyRequest.of(key, windowOf(key, leaseMillis)));
    }
    Batch<String> batch;
    try {
      batch = guard.claimBatch(requests, ResultCodec.string());
    } catch (RuntimeException e) {
      for (String key : chosen) {
        logCall(new Call(key, "batch", process, name(e), null, false, System.currentTimeMillis()));
      }
      backOff(e);
      return;
    }
    List<String[]> sent = new ArrayList<>();
    for (Batch.Item item : batch.toSend()) {
      try {
        String result = send(item.context(), random);
        batch.succeeded(item, result);
        sent.add(new String[] {item.key(), result});
      } catch (Exception e) {
        batch.failed(item, e);
        logCall(
            new Call(
                item.key(),
                "batch",
                process,
                "SEND_FAILED",
                null,
                false,
                System.currentTimeMillis()));
      }
    }
    Batch.Recorded recorded = batch.record();
    for (String[] keyAndResult : sent) {
      logCall(
          new Call(
              keyAndResult[0],
              "batch",
              process,
              "SENT",
              keyAndResult[1],
              !recorded.notRecorded().contains(keyAndResult[0]),
              System.currentTimeMillis()));
    }
    for (var replay : batch.replayed().entrySet()) {
      logCall(
          new Call(
              replay.getKey(),
              "batch",
              process,
              "REPLAYED",
              replay.getValue().value(),
              true,
              System.currentTimeMillis()));
    }
    for (String key : batch.inFlight()) {
      logCall(
          new Call(key, "batch", process, "IN_PROGRESS", null, false, System.currentTimeMillis()));
    }
    // claimed but never handed out: logged so that a claim the checker cannot see leaves a trace
    for (String key : batch.lapsed()) {
      logCall(new Call(key, "batch", process, "LAPSED", null, false, System.currentTimeMillis()));
    }
    for (var refused : batch.refused().entrySet()) {
      logCall(
          new Call(
              refused.getKey(),
              "batch",
              process,
              name(refused.getValue()),
              null,
              false,
              System.currentTimeMillis()));
    }
  }

  /**
   * The fake provider: most sends are quick, one in ten takes 1.5 to 2.5 leases (the guard must
   * renew it), a few fail before the provider accepts anything, and a few return on an interrupted
   * thread. An accepted send is logged and synced before the result is returned.
   */
  private String send(SendContext context, Random random) throws Exception {
    int dice;
    long millis;
    synchronized (random) {
      dice = random.nextInt(100);
      millis =
          dice < 10 ? leaseMillis * 3 / 2 + random.nextInt((int) leaseMillis) : random.nextInt(30);
    }
    long start = System.currentTimeMillis();
    Thread.sleep(millis);
    if (dice >= 94 && dice < 98) {
      throw new IOException("provider timed out (transient)");
    }
    if (dice >= 98) {
      throw new PermanentRejection("invalid recipient");
    }
    String result = "r-" + process + "-" + results.incrementAndGet();
    Send send =
        new Send(
            context.key(),
            context.providerKey(),
            context.attempt(),
            process,
            start,
            System.currentTimeMillis(),
            result);
    write(sendLog, send.line(), true);
    if (dice >= 90 && dice < 94) {
      // a Future.cancel(true) or a time limiter that fired as the provider call finished
      Thread.currentThread().interrupt();
    }
    return result;
  }

  /** While the store is down, a caller retries after a pause, as a queue consumer would. */
  private static void backOff(Throwable failure) {
    if (failure instanceof KeyStoreException) {
      try {
        Thread.sleep(50);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  private void logCall(String key, String kind, Outcome<String> outcome) throws IOException {
    logCall(
        new Call(
            key,
            kind,
            process,
            outcome.replayed() ? "REPLAYED" : "SENT",
            outcome.value(),
            outcome.recorded(),
            System.currentTimeMillis()));
  }

  private void logCall(Call call) throws IOException {
    write(callLog, call.line(), false);
  }

  static String name(Throwable e) {
    if (e instanceof IdempotencyInProgressException) {
      return "IN_PROGRESS";
    }
    if (e instanceof KeyStoreException) {
      return "STORE_FAILED";
    }
    if (e instanceof IdempotencyStoredFailureException) {
      return "STORED_FAILURE";
    }
    if (e instanceof IdempotencyOutcomeUnknownException) {
      return "OUTCOME_UNKNOWN";
    }
    if (e instanceof IdempotencyResultUnavailableException) {
      return "RESULT_UNAVAILABLE";
    }
    if (e instanceof IdempotencyKeyReuseException) {
      return "KEY_REUSE";
    }
    if (e instanceof IdempotencyException) {
      return "IDEMPOTENCY_" + e.getClass().getSimpleName();
    }
    if (e instanceof SendFailedException || e instanceof RuntimeException) {
      return "SEND_FAILED";
    }
    return "OTHER_" + e.getClass().getSimpleName();
  }

  /**
   * Every few seconds, moves the guard's wall clock: by up to ten seconds either way on a store
   * with server or database time; on a client-time store, in even-numbered processes only, ahead of
   * the true time by up to four leases for a second or three, then back to it (logged as {@code
   * CLOCK_AHEAD} with the time it lasts, planned before it starts).
   */
  private Void jumpClock(Random random) {
    try {
      while (!restUnlessStopping(2_000 + random.nextInt(3_000))) {
        long now = System.currentTimeMillis();
        if (!clientTime) {
          clockOffset.addAndGet(random.nextInt(20_001) - 10_000);
          write(faultLog, new Fault("CLOCK_JUMP", process, now, now).line(), false);
        } else if (process % 2 == 0) {
          long hold = 1_000 + random.nextInt(2_000);
          write(faultLog, new Fault("CLOCK_AHEAD", process, now, now + hold).line(), false);
          // below maxClockAheadMillis, which the checker counts on
          clockOffset.set(leaseMillis / 2 + random.nextInt((int) leaseMillis * 4));
          Thread.sleep(hold);
          clockOffset.set(0);
        }
      }
    } catch (InterruptedException | IOException e) {
      Thread.currentThread().interrupt();
    }
    return null;
  }

  /**
   * Logs every time this process did not run for a quarter lease or more ({@code STALL}): an
   * overloaded host (or a long collection) freezes every thread of it, lease keeper included, as a
   * {@code SIGSTOP} would, and the checker must not take what follows for a broken promise. A
   * quarter lease is the margin the guard keeps when it starts a send (it never starts one with
   * less left), so a freeze that long between that check and the provider call, or before the
   * keeper's next renewal, can let the lease lapse under a live owner. A thread that wakes every 20
   * ms sees such a freeze as a late wake-up.
   */
  private void watchForStalls() {
    long last = System.currentTimeMillis();
    while (!stopping()) {
      try {
        Thread.sleep(20);
      } catch (InterruptedException e) {
        return;
      }
      long now = System.currentTimeMillis();
      if (now - last >= leaseMillis / 4) {
        try {
          write(faultLog, new Fault("STALL", process, last, now).line(), false);
        } catch (IOException e) {
          return;
        }
      }
      last = now;
    }
  }

  /**
   * Every few seconds, now and then, occupies every thread of the guard's blocking-store executor
   * for two to three leases (logged as {@code EXECUTOR_BUSY}): lease renewal must not wait for it.
   */
  private Void hogStoreExecutor(Random random) {
    try {
      while (!restUnlessStopping(2_000 + random.nextInt(3_000))) {
        if (random.nextBoolean()) {
          continue;
        }
        long busy = leaseMillis * 2 + random.nextInt((int) leaseMillis);
        long now = System.currentTimeMillis();
        write(faultLog, new Fault("EXECUTOR_BUSY", process, now, now + busy).line(), false);
        for (int i = 0; i < 4; i++) {
          storeExecutor.execute(
              () -> {
                try {
                  Thread.sleep(busy);
                } catch (InterruptedException e) {
                  Thread.currentThread().interrupt();
                }
              });
        }
      }
    } catch (InterruptedException | IOException e) {
      Thread.currentThread().interrupt();
    }
    return null;
  }

  private Clock jumpingClock() {
    return new Clock() {
      @Override
      public ZoneId getZone() {
        return ZoneOffset.UTC;
      }

      @Override
      public Clock withZone(ZoneId zone) {
        return this;
      }

      @Override
      public Instant instant() {
        return Instant.ofEpochMilli(System.currentTimeMillis() + clockOffset.get());
      }
    };
  }

  private FileChannel open(String name) throws IOException {
    return FileChannel.open(
        dir.resolve(name),
        StandardOpenOption.CREATE,
        StandardOpenOption.WRITE,
        StandardOpenOption.APPEND);
  }

  /**
   * Appends one line in one write; {@code sync} forces it to disk, as a provider's ledger would. A
   * file channel closes itself when written on an interrupted thread, so the interrupt a sender
   * left on its thread is set aside for the write.
   */
  static void write(FileChannel channel, String line, boolean sync) throws IOException {
    ByteBuffer bytes = ByteBuffer.wrap((line + "\n").getBytes(StandardCharsets.UTF_8));
    boolean interrupted = Thread.interrupted();
    try {
      writeAll(channel, bytes, sync);
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  private static void writeAll(FileChannel channel, ByteBuffer bytes, boolean sync)
      throws IOException {
    synchronized (channel) {
      while (bytes.hasRemaining()) {
        channel.write(bytes);
      }
      if (sync) {
        channel.force(false);
      }
    }
  }

  /** The deliberately broken store: lease renewals report success and change nothing. */
  static final class RenewalDroppingStore extends ForwardingKeyStore {
    RenewalDroppingStore(KeyStore delegate) {
      super(delegate);
    }

    @Override
    public boolean extend(ExtendRequest request) {
      return true;
    }

    @Override
    public List<Boolean> extendAll(List<ExtendRequest> requests) {
      List<Boolean> results = new ArrayList<>(requests.size());
      requests.forEach(request -> results.add(true));
      return results;
    }
  }
}
