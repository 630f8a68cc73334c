package dev.idempotency.reliability;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.KeyStoreException;
import dev.idempotency.Outcome;
import dev.idempotency.ResultCodec;
import dev.idempotency.SendContext;
import dev.idempotency.jdbc.JdbcKeyStore;
import dev.idempotency.reliability.FaultHistory.Call;
import dev.idempotency.reliability.FaultHistory.Fault;
import dev.idempotency.reliability.FaultHistory.Send;
import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Clock;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import javax.sql.DataSource;

/**
 * One client process of a joined-transaction fault run (SPEC section 17): many threads, each in a
 * loop of one application transaction on its own connection, in which {@code executeInTransaction}
 * claims a key and its sender inserts an outbox row ({@link OutboxTable}) and returns the row's id;
 * then the application works on (20 to 200 ms after a first enqueue, up to 20 ms after a replay)
 * and commits, or (one time in twenty) rolls the whole transaction back. Keys come from the sliding
 * key space of {@link FaultRunChild}, half of them hot, so that several threads and processes
 * enqueue the same key at once. One sender in ten holds its transaction open for 1.5 to 2.5 leases
 * after the insert (so that kills, pauses, cuts and restarts land inside open transactions), and a
 * few fail after the insert. The guard's clock jumps by up to ten seconds either way every 2 to 5 s
 * (the store runs on database time). It runs until the file {@code stop} appears in its directory.
 *
 * <p>What it logs: every enqueue its senders made (the {@code sends-} log, whether or not it
 * committed), every call's outcome as the application saw it ({@code SENT} or {@code REPLAYED} with
 * the id, only after its commit returned; the same with {@code _ROLLED_BACK} appended, with the id
 * the call had returned, when the application rolled back; with {@code _COMMIT_FAILED}, when the
 * commit threw, so that it may or may not have happened; or the failure, with the id if its sender
 * had enqueued one), and its clock jumps. So an enqueue whose id is on no call's line was made by a
 * process killed before the call ended.
 *
 * <p>Arguments as {@link FaultRunChild}'s; BREAK is {@code none} or {@value #SEPARATE_OUTBOX} (the
 * deliberately broken variant the checker must catch: the sender inserts the outbox row on another
 * connection in auto-commit, so the row commits apart from the key's record).
 */
public final class OutboxFaultRunChild {

  /** The spec prefix of a joined-transaction run. */
  static final String JOINED = "joined:";

  /** The broken variant: the outbox row commits in a transaction of its own. */
  static final String SEPARATE_OUTBOX = "separate-outbox";

  private final JdbcKeyStore store;
  private final DataSource dataSource;
  private final IdempotencyGuard guard;
  private final int process;
  private final long leaseMillis;
  private final int keys;
  private final int hotKeys;
  private final Path dir;
  private final long startMillis;
  private final boolean separateOutbox;
  private final FileChannel sendLog;
  private final FileChannel callLog;
  private final FileChannel faultLog;
  private final AtomicLong ids = new AtomicLong();
  private final AtomicLong clockOffset = new AtomicLong();

  private OutboxFaultRunChild(String[] args) throws IOException {
    dir = Path.of(args[1]);
    process = Integer.parseInt(args[2]);
    leaseMillis = Long.parseLong(args[4]);
    keys = Integer.parseInt(args[5]);
    hotKeys = Integer.parseInt(args[6]);
    int threads = Integer.parseInt(args[7]);
    separateOutbox = args[8].equals(SEPARATE_OUTBOX);
    startMillis = Long.parseLong(args[9]);
    // one connection per thread for its transaction, one more each for the broken variant's insert
    store = (JdbcKeyStore) FaultRunChild.openRetrying(args[0], threads * 2 + 2);
    dataSource = store.dataSource().orElseThrow();
    sendLog = open("sends-" + process + ".log");
    callLog = open("calls-" + process + ".log");
    faultLog = open("faults-" + process + ".log");
    guard =
        IdempotencyGuard.builder()
            .store(store)
            .lease(java.time.Duration.ofMillis(leaseMillis))
            .inFlightWait(java.time.Duration.ofMillis(300))
            .clock(jumpingClock())
            .build();
  }

  /**
   * Runs the process.
   *
   * @param args see the class documentation
   * @throws Exception if it cannot start
   */
  public static void main(String[] args) throws Exception {
    OutboxFaultRunChild child = new OutboxFaultRunChild(args);
    long seed = Long.parseLong(args[3]);
    int threads = Integer.parseInt(args[7]);
    System.out.println("READY");
    System.out.flush();
    Files.createFile(child.dir.resolve("ready-" + child.process));
    ExecutorService pool = Executors.newFixedThreadPool(threads + 1);
    for (int t = 0; t < threads; t++) {
      Random random = new Random(seed * 1_000 + t);
      pool.submit(() -> child.work(random));
    }
    pool.submit(() -> child.jumpClock(new Random(seed * 1_000 - 1)));
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

  private Void work(Random random) {
    while (!stopping()) {
      try {
        call(random);
      } catch (RuntimeException | IOException unexpected) {
        unexpected.printStackTrace();
      }
    }
    return null;
  }

  private String key(Random random) {
    long base = (System.currentTimeMillis() - startMillis) / FaultRunChild.KEY_EVERY_MILLIS;
    int offset = random.nextInt(2) == 0 ? keys - 1 - random.nextInt(hotKeys) : random.nextInt(keys);
    return FaultRunChild.keyName(base + offset);
  }

  /** One application transaction: the guarded enqueue, some more work, commit or rollback. */
  private void call(Random random) throws IOException {
    String key = key(random);
    boolean rollBack = random.nextInt(100) < 5;
    // the id this call's sender enqueued, for its failure's log line
    AtomicReference<String> enqueued = new AtomicReference<>();
    try (Connection connection = dataSource.getConnection()) {
      connection.setAutoCommit(false);
      Outcome<String> outcome;
      try {
        outcome =
            guard.executeInTransaction(
                store.joining(connection),
                IdempotencyRequest.of(key, FaultRunChild.TTL),
                ResultCodec.string(),
                ctx -> enqueue(connection, ctx, random, enqueued));
        // the application's own work after the guarded call, in the same transaction: after a first
        // enqueue, long enough that kills and cuts land between the enqueue and the commit
        Thread.sleep(outcome.replayed() ? random.nextInt(20) : 20 + random.nextInt(180));
        if (rollBack) {
          connection.rollback();
          logCall(key, kind(outcome) + "_ROLLED_BACK", outcome.value());
          return;
        }
      } catch (RuntimeException | SQLException | InterruptedException e) {
        rollBackQuietly(connection);
        String failure = e instanceof SQLException ? "STORE_FAILED" : FaultRunChild.name(e);
        logCall(key, failure, enqueued.get());
        backOff(e);
        return;
      }
      try {
        connection.commit();
      } catch (SQLException e) {
        // the commit may have happened or not: a connection that broke after sending it cannot say
        logCall(key, kind(outcome) + "_COMMIT_FAILED", outcome.value());
        return;
      }
      logCall(key, kind(outcome), outcome.value());
    } catch (SQLException e) {
      // no connection (the pool waited while the database restarted or the network was cut), or
      // closing a broken one
      logCall(key, "NO_CONNECTION", null);
      backOff(e);
    }
  }

  /**
   * The sender: inserts the outbox row and returns its id. One in ten then holds the transaction
   * for 1.5 to 2.5 leases; a few fail after the insert (the guard releases the claim and the
   * application rolls back). Each enqueue is logged before it returns.
   */
  private String enqueue(
      Connection connection, SendContext context, Random random, AtomicReference<String> enqueued)
      throws Exception {
    int dice = random.nextInt(100);
    long millis =
        dice < 10 ? leaseMillis * 3 / 2 + random.nextInt((int) leaseMillis) : random.nextInt(30);
    String id = "o-" + process + "-" + ids.incrementAndGet();
    long start = System.currentTimeMillis();
    if (separateOutbox) {
      try (Connection apart = dataSource.getConnection()) {
        apart.setAutoCommit(true);
        OutboxTable.insert(apart, id, context.key(), "sms for " + context.key());
      }
    } else {
      OutboxTable.insert(connection, id, context.key(), "sms for " + context.key());
    }
    enqueued.set(id);
    Send send =
        new Send(
            context.key(),
            context.providerKey(),
            context.attempt(),
            process,
            start,
            System.currentTimeMillis(),
            id);
    FaultRunChild.write(sendLog, send.line(), false);
    Thread.sleep(millis);
    if (dice >= 94) {
      throw new IOException("the enqueue failed after its insert (transient)");
    }
    return id;
  }

  private static String kind(Outcome<String> outcome) {
    return outcome.replayed() ? "REPLAYED" : "SENT";
  }

  private static void rollBackQuietly(Connection connection) {
    try {
      connection.rollback();
    } catch (SQLException e) {
      // a broken connection: the database rolls the transaction back when it goes
    }
  }

  /** While the store is down, a caller retries after a pause, as a queue consumer would. */
  private static void backOff(Throwable failure) {
    if (failure instanceof KeyStoreException || failure instanceof SQLException) {
      try {
        Thread.sleep(50);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  private void logCall(String key, String outcome, String value) throws IOException {
    Call call =
        new Call(
            key,
            "joined",
            process,
            outcome,
            value,
            outcome.equals("SENT") || outcome.equals("REPLAYED"),
            System.currentTimeMillis());
    FaultRunChild.write(callLog, call.line(), false);
  }

  /** Every 2 to 5 s, moves the guard's wall clock by up to ten seconds either way. */
  private Void jumpClock(Random random) {
    try {
      while (!stopping()) {
        long rest = 2_000 + random.nextInt(3_000);
        for (long slept = 0; slept < rest && !stopping(); slept += 100) {
          Thread.sleep(100);
        }
        long now = System.currentTimeMillis();
        clockOffset.addAndGet(random.nextInt(20_001) - 10_000);
        FaultRunChild.write(faultLog, new Fault("CLOCK_JUMP", process, now, now).line(), false);
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
}
