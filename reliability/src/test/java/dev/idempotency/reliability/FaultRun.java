package dev.idempotency.reliability;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.IdempotencyOutcomeUnknownException;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.IdempotencyStoredFailureException;
import dev.idempotency.ResultCodec;
import dev.idempotency.TakeoverPolicy;
import dev.idempotency.jdbc.JdbcKeyStore;
import dev.idempotency.reliability.FaultHistory.Fault;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.testservers.EmbeddedRedisCluster;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

/**
 * A randomized fault run on one store: several client JVMs ({@link FaultRunChild}) work a shared
 * key space while a seeded nemesis kills and restarts them, pauses them past their lease, restarts
 * the store (persistence on), and delays or cuts the network through a proxy; the children jump
 * their own clocks. Afterwards the run settles, probes every key, and hands the whole history to
 * {@link DuplicateChecker}. On a joined store ({@link StoreKind#joined()}) the clients are {@link
 * OutboxFaultRunChild}ren, each call an enqueue inside an application transaction, the nemesis the
 * same, and the end is {@link OutboxProbe} and {@link OutboxChecker} instead.
 *
 * <p>Same seed, same schedule of faults: the nemesis draws its choices and its waits from it (the
 * interleaving of the clients' threads stays the machine's).
 */
final class FaultRun {

  enum StoreKind {
    POSTGRESQL,
    /** PostgreSQL on the guard's clock, with clients' clocks running ahead (see FaultRunChild). */
    POSTGRESQL_CLIENT_TIME,
    MARIADB,
    REDIS,
    REDIS_CLUSTER,
    /**
     * DynamoDB on dynalite (data on disk, killed with {@code SIGKILL} and restarted), through the
     * proxy; on the guard's clock, as DynamoDB always is, so its clients' clocks move as on {@link
     * #POSTGRESQL_CLIENT_TIME}.
     */
    DYNAMODB,
    /**
     * PostgreSQL, every call joined to an application transaction that enqueues an outbox row
     * ({@link OutboxFaultRunChild}), checked by {@link OutboxChecker}: no duplicate enqueue at all.
     */
    POSTGRESQL_JOINED,
    /** MariaDB, joined as {@link #POSTGRESQL_JOINED}. */
    MARIADB_JOINED;

    boolean joined() {
      return this == POSTGRESQL_JOINED || this == MARIADB_JOINED;
    }
  }

  /**
   * A run's settings. {@code rounds}: the nemesis strikes at most this many times (0: as often as
   * {@code duration} allows); a run ends when either runs out.
   */
  record Settings(
      StoreKind store,
      Duration duration,
      long seed,
      int processes,
      int threads,
      int keys,
      int hotKeys,
      Duration lease,
      String breakMode,
      int rounds) {

    static Settings shortRun(StoreKind store, long seed) {
      return new Settings(
          store, Duration.ofSeconds(20), seed, 3, 6, 150, 8, Duration.ofMillis(800), "none", 0);
    }

    Settings broken(String mode) {
      return new Settings(
          store, duration, seed, processes, threads, keys, hotKeys, lease, mode, rounds);
    }

    Settings lasting(Duration duration) {
      return new Settings(
          store, duration, seed, processes, threads, keys, hotKeys, lease, breakMode, rounds);
    }

    /** The same run, its nemesis striking at most {@code rounds} times (0: no bound). */
    Settings strikingAtMost(int rounds) {
      return new Settings(
          store, duration, seed, processes, threads, keys, hotKeys, lease, breakMode, rounds);
    }
  }

  private final Settings settings;
  private final Path dir;
  private final Random nemesis;
  private final List<Process> children = new ArrayList<>();
  private final List<Integer> processIds = new ArrayList<>();
  private FileChannel faultLog;
  private int nextProcess;
  private long startMillis;

  FaultRun(Settings settings, Path dir) {
    this.settings = settings;
    this.dir = dir;
    this.nemesis = new Random(settings.seed());
  }

  /** Runs the whole thing and returns the checker's report. */
  DuplicateChecker.Report run() throws Exception {
    faultLog =
        FileChannel.open(
            dir.resolve("faults.log"),
            StandardOpenOption.CREATE,
            StandardOpenOption.WRITE,
            StandardOpenOption.APPEND);
    try {
      return switch (settings.store()) {
        case POSTGRESQL -> onPostgres("");
        case POSTGRESQL_CLIENT_TIME -> onPostgres(FaultRunChild.CLIENT_TIME);
        case POSTGRESQL_JOINED -> onPostgres(OutboxFaultRunChild.JOINED);
        case MARIADB -> onMariaDb("");
        case MARIADB_JOINED -> onMariaDb(OutboxFaultRunChild.JOINED);
        case REDIS -> onRedis();
        case REDIS_CLUSTER -> onCluster();
        case DYNAMODB -> onDynamoDb();
      };
    } finally {
      children.forEach(Process::destroyForcibly);
      faultLog.close();
    }
  }

  private DuplicateChecker.Report onPostgres(String timePrefix) throws Exception {
    try (RestartablePostgres postgres = new RestartablePostgres();
        DelayProxy proxy = new DelayProxy(postgres.port)) {
      // bounded connects and reads even inside the pool: a cut network never hangs a client
      String viaProxy =
          postgres.url().replace(":" + postgres.port + "/", ":" + proxy.port() + "/")
              + "&connectTimeout=5&loginTimeout=10&socketTimeout=60";
      return run(
          timePrefix + viaProxy,
          timePrefix + postgres.url(),
          proxy,
          () -> {
            postgres.stop();
            postgres.restart();
          });
    }
  }

  private DuplicateChecker.Report onMariaDb(String prefix) throws Exception {
    try (EmbeddedMariaDb mariadb = new EmbeddedMariaDb();
        DelayProxy proxy = new DelayProxy(mariadb.port())) {
      String viaProxy =
          mariadb.url().replace(":" + mariadb.port() + "/", ":" + proxy.port() + "/")
              + "&connectTimeout=5000&socketTimeout=60000";
      return run(prefix + viaProxy, prefix + mariadb.url(), proxy, mariadb::restart);
    }
  }

  private DuplicateChecker.Report onRedis() throws Exception {
    try (RestartableRedis redis = new RestartableRedis(true);
        DelayProxy proxy = new DelayProxy(redis.port)) {
      return run(
          "redis://127.0.0.1:" + proxy.port(),
          redis.uri(),
          proxy,
          () -> {
            redis.kill();
            redis.start();
          });
    }
  }

  private DuplicateChecker.Report onDynamoDb() throws Exception {
    try (RestartableDynalite dynalite = new RestartableDynalite();
        DelayProxy proxy = new DelayProxy(dynalite.port)) {
      return run(
          FaultRunChild.CLIENT_TIME + DynamoDbStores.spec(proxy.port()),
          dynalite.spec(),
          proxy,
          () -> {
            dynalite.kill();
            dynalite.start();
          });
    }
  }

  /**
   * A cluster announces its nodes' own ports, so no proxy can sit in between: no network faults.
   */
  private DuplicateChecker.Report onCluster() throws Exception {
    try (EmbeddedRedisCluster cluster = new EmbeddedRedisCluster()) {
      String spec =
          "cluster:"
              + cluster.ports.stream()
                  .map(port -> "redis://127.0.0.1:" + port)
                  .collect(Collectors.joining(","));
      return run(spec, spec, null, null);
    }
  }

  interface StoreRestart {
    void restart() throws Exception;
  }

  private DuplicateChecker.Report run(
      String clientSpec, String directSpec, DelayProxy proxy, StoreRestart storeRestart)
      throws Exception {
    // create the table once, before the clients race to
    long began = System.nanoTime();
    KeyStore direct = Stores.open(directSpec, 2);
    if (settings.store().joined()) {
      OutboxTable.create(((JdbcKeyStore) direct).dataSource().orElseThrow());
    }
    startMillis = System.currentTimeMillis();
    for (int i = 0; i < settings.processes(); i++) {
      startChild(clientSpec);
    }
    awaitReady();
    long ready = System.nanoTime();
    long activeFrom = System.currentTimeMillis();
    long end = System.nanoTime() + settings.duration().toNanos();
    long lease = settings.lease().toMillis();
    int rounds = 0;
    while (System.nanoTime() < end && (settings.rounds() == 0 || rounds++ < settings.rounds())) {
      Thread.sleep(1_000 + nemesis.nextInt(2_000));
      int dice = nemesis.nextInt(100);
      int victim = nemesis.nextInt(children.size());
      if (dice < 25) {
        kill(victim);
        Thread.sleep(300);
        startChild(clientSpec);
      } else if (dice < 50) {
        pause(victim, lease * 2 + nemesis.nextInt((int) lease * 2));
      } else if (dice < 65 && storeRestart != null) {
        long at = System.currentTimeMillis();
        storeRestart.restart();
        fault(new Fault("STORE_RESTART", -1, at, System.currentTimeMillis()));
      } else if (dice < 82 && proxy != null) {
        long at = System.currentTimeMillis();
        proxy.delay(20 + nemesis.nextInt(200));
        Thread.sleep(1_000 + nemesis.nextInt(2_000));
        proxy.pass();
        fault(new Fault("DELAY", -1, at, System.currentTimeMillis()));
      } else if (proxy != null) {
        long at = System.currentTimeMillis();
        proxy.drop();
        Thread.sleep(500 + nemesis.nextInt(1_500));
        proxy.reset(); // TCP does not lose bytes: a cut ends in broken connections
        proxy.pass();
        fault(new Fault("PARTITION", -1, at, System.currentTimeMillis()));
      }
    }
    long faultsEnded = System.nanoTime();
    Files.writeString(
        dir.resolve(FaultHistory.WINDOW_FILE),
        activeFrom + "\n" + System.currentTimeMillis() + "\n" + settings.lease().toMillis() + "\n");
    Files.createFile(dir.resolve("stop"));
    for (int i = 0; i < children.size(); i++) {
      Process child = children.get(i);
      if (child.isAlive() && !child.waitFor(3, TimeUnit.MINUTES)) {
        signal("QUIT", child); // a thread dump into its out file
        Thread.sleep(2_000);
        child.destroyForcibly();
        throw new AssertionError(
            "client " + processIds.get(i) + " did not stop; its threads are in " + dir);
      }
    }
    long stopped = System.nanoTime();
    Thread.sleep(lease + 300); // every lease the clients held has run out
    if (settings.store().joined()) {
      DuplicateChecker.Report report =
          OutboxProbe.settleAndCheck((JdbcKeyStore) direct, dir, lastKey());
      printPhases(began, ready, faultsEnded, stopped);
      return report;
    }
    List<String> stuck = new ArrayList<>();
    // the probe reads every key the clients could have used
    int abandoned = probe(direct, stuck);
    Files.writeString(
        dir.resolve("settled.txt"), abandoned + "\n" + String.join("\n", stuck) + "\n");
    printPhases(began, ready, faultsEnded, stopped);
    return DuplicateChecker.check(FaultHistory.read(dir), stuck, abandoned);
  }

  /** Where a run's time goes, for whoever shortens the build next. */
  private static void printPhases(long began, long ready, long faultsEnded, long stopped) {
    System.out.printf(
        "phases: clients ready %d ms, faults %d ms, clients stopped %d ms, settled and probed %d"
            + " ms%n",
        (ready - began) / 1_000_000,
        (faultsEnded - ready) / 1_000_000,
        (stopped - faultsEnded) / 1_000_000,
        (System.nanoTime() - stopped) / 1_000_000);
  }

  /** The last key the clients could have used (the key space slides, see {@link FaultRunChild}). */
  private long lastKey() {
    return (System.currentTimeMillis() - startMillis) / FaultRunChild.KEY_EVERY_MILLIS
        + settings.keys();
  }

  /**
   * After the run settled: a strict guard with no wait reads every key. A key still in progress
   * with a live lease is stuck (nobody is left to hold it); one in progress with an expired lease
   * was abandoned by a killed owner and is taken over on next use. The probe's sender runs only for
   * keys never completed, and records nothing the checker reads.
   */
  private int probe(KeyStore store, List<String> stuck) {
    IdempotencyGuard strict =
        IdempotencyGuard.builder()
            .store(store)
            .takeoverPolicy(TakeoverPolicy.REFUSE)
            .inFlightWait(Duration.ZERO)
            .build();
    int abandoned = 0;
    long lastKey = lastKey();
    for (long i = 0; i <= lastKey; i++) {
      String key = FaultRunChild.keyName(i);
      try {
        strict.executeForOutcome(
            IdempotencyRequest.of(key, FaultRunChild.TTL), ResultCodec.string(), ctx -> "probe");
      } catch (IdempotencyInProgressException e) {
        stuck.add(key);
      } catch (IdempotencyOutcomeUnknownException e) {
        abandoned++;
      } catch (IdempotencyStoredFailureException e) {
        // a permanent failure, stored for the window: settled
      }
    }
    return abandoned;
  }

  private void startChild(String spec) throws IOException {
    int process = nextProcess++;
    List<String> command =
        ChildJvm.javaCommand(
            192, settings.store().joined() ? OutboxFaultRunChild.class : FaultRunChild.class);
    command.addAll(
        List.of(
            spec,
            dir.toString(),
            Integer.toString(process),
            Long.toString(settings.seed() * 31 + process),
            Long.toString(settings.lease().toMillis()),
            Integer.toString(settings.keys()),
            Integer.toString(settings.hotKeys()),
            Integer.toString(settings.threads()),
            settings.breakMode(),
            Long.toString(startMillis)));
    Process child =
        new ProcessBuilder(command)
            .redirectOutput(dir.resolve("out-" + process + ".txt").toFile())
            .redirectError(dir.resolve("err-" + process + ".txt").toFile())
            .start();
    children.add(child);
    processIds.add(process);
  }

  /** Waits (bounded) until the first clients have opened the store, before any fault. */
  private void awaitReady() throws Exception {
    long deadline = System.nanoTime() + TimeUnit.MINUTES.toNanos(2);
    for (int process : processIds) {
      while (!Files.exists(dir.resolve("ready-" + process))) {
        if (System.nanoTime() > deadline) {
          throw new AssertionError("client " + process + " did not start; see " + dir);
        }
        Thread.sleep(100);
      }
    }
  }

  private void kill(int index) throws Exception {
    Process child = children.get(index);
    if (!child.isAlive()) {
      return;
    }
    long at = System.currentTimeMillis();
    signal("KILL", child);
    child.waitFor(30, TimeUnit.SECONDS);
    fault(new Fault("KILL", processIds.get(index), at, at));
    children.remove(index);
    processIds.remove(index);
  }

  private void pause(int index, long millis) throws Exception {
    Process child = children.get(index);
    if (!child.isAlive()) {
      return;
    }
    long at = System.currentTimeMillis();
    signal("STOP", child);
    try {
      Thread.sleep(millis);
    } finally {
      signal("CONT", child);
      fault(new Fault("PAUSE", processIds.get(index), at, System.currentTimeMillis()));
    }
  }

  private static void signal(String signal, Process process) throws Exception {
    Process kill = new ProcessBuilder("kill", "-" + signal, Long.toString(process.pid())).start();
    if (!kill.waitFor(30, TimeUnit.SECONDS) || kill.exitValue() != 0) {
      throw new IllegalStateException("kill -" + signal + " " + process.pid() + " failed");
    }
  }

  private void fault(Fault fault) throws IOException {
    ByteBuffer bytes = ByteBuffer.wrap((fault.line() + "\n").getBytes(StandardCharsets.UTF_8));
    while (bytes.hasRemaining()) {
      faultLog.write(bytes);
    }
  }

  /**
   * Checks a finished run's directory again (its logs and {@code settled.txt}), for reading a run
   * after the fact: {@code java -cp <test classpath> dev.idempotency.reliability.FaultRun DIR}.
   *
   * @param args the run's directory
   * @throws IOException if it cannot be read
   */
  public static void main(String[] args) throws IOException {
    Path dir = Path.of(args[0]);
    if (Files.exists(dir.resolve(OutboxProbe.ROWS_FILE))) {
      DuplicateChecker.Report joined = OutboxProbe.recheck(dir);
      System.out.println(DuplicateChecker.Report.header());
      System.out.println(joined.row(dir.getFileName().toString()));
      System.out.println(joined);
      return;
    }
    // a run from before settled.txt was written counts as settled
    Path settledFile = dir.resolve("settled.txt");
    List<String> settled =
        Files.exists(settledFile) ? Files.readAllLines(settledFile) : List.of("0");
    DuplicateChecker.Report report =
        DuplicateChecker.check(
            FaultHistory.read(dir),
            settled.subList(1, settled.size()).stream().filter(k -> !k.isBlank()).toList(),
            Integer.parseInt(settled.get(0)));
    System.out.println(DuplicateChecker.Report.header());
    System.out.println(report.row(dir.getFileName().toString()));
    System.out.println(report);
  }

  /**
   * The long run: {@code mvn -pl reliability -am verify -Dtest=FaultRunTest
   * -Dsurefire.failIfNoSpecifiedTests=false -Dfaultrun.seconds=600 -Dfaultrun.seed=7}.
   */
  static Duration configuredDuration(Duration otherwise) {
    String seconds = System.getProperty("faultrun.seconds");
    return seconds == null ? otherwise : Duration.ofSeconds(Long.parseLong(seconds));
  }

  /**
   * How many times the nemesis of a run inside {@code mvn verify} strikes at most: {@code
   * otherwise}, unless {@code -Dfaultrun.rounds} says (0: no bound) or {@code -Dfaultrun.seconds}
   * asks for a long run, which has no bound.
   */
  static int configuredRounds(int otherwise) {
    String rounds = System.getProperty("faultrun.rounds");
    if (rounds != null) {
      return Integer.parseInt(rounds);
    }
    return System.getProperty("faultrun.seconds") == null ? otherwise : 0;
  }

  static long configuredSeed(long otherwise) {
    String seed = System.getProperty("faultrun.seed");
    return seed == null ? otherwise : Long.parseLong(seed);
  }
}
