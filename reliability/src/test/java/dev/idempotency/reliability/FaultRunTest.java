package dev.idempotency.reliability;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.reliability.FaultRun.Settings;
import dev.idempotency.reliability.FaultRun.StoreKind;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.parallel.Isolated;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The randomized fault run, short and seeded, on every shared store, and in the joined-transaction
 * mode on PostgreSQL and MariaDB (no duplicate enqueue at all); and the same runs on a deliberately
 * broken store and a deliberately broken enqueue, which the checkers must fail. Each run appends
 * its row to {@code target/fault-runs.md}. The long run is the same test with more time
 * (docs/guarantees.md).
 *
 * <p>{@code @Isolated}: its clients and nemesis load both cores, and its 800 ms leases must not
 * compete with another test class for them.
 */
@Isolated
class FaultRunTest {

  private static final long SEED = FaultRun.configuredSeed(17);
  private static final Duration SHORT = FaultRun.configuredDuration(Duration.ofSeconds(10));

  /**
   * The broken store's run, whatever the others last: at 10 s it shows 12 to 19 duplicates without
   * a cause (seeds 17 and 5), and a long run has no more to prove with it.
   */
  private static final Duration BROKEN_RUN = Duration.ofSeconds(10);

  /**
   * The joined run with its outbox row committed apart, on purpose: one time in twenty the
   * application rolls back after the enqueue, so duplicates come within seconds whatever the faults
   * (35 in 10 s, seed 17), and a few seconds keep the build short.
   */
  private static final Duration BROKEN_JOINED_RUN = Duration.ofSeconds(5);

  /**
   * No fault stops every client for long: a store restart takes seconds, a cut at most 2 s, a pause
   * one process. A run where no call succeeds for this long has stalled.
   */
  private static final long QUIET_LIMIT_MILLIS = 15_000;

  @ParameterizedTest
  @EnumSource(value = StoreKind.class, names = ".*_JOINED", mode = EnumSource.Mode.MATCH_NONE)
  void everySendIsAccountedForAndEveryDuplicateHasAnAllowedCause(StoreKind store) throws Exception {
    assumeSelected(store);
    Path dir = runDirectory(store.name().toLowerCase());
    DuplicateChecker.Report report =
        new FaultRun(Settings.shortRun(store, SEED).lasting(SHORT), dir).run();
    record(store.name().toLowerCase(), report);

    assertThat(report.sends).as("the run sent").isGreaterThanOrEqualTo(minimumSends(store));
    assertThat(report.replays).as("the run replayed").isGreaterThanOrEqualTo(minimumReplays(store));
    assertThat(report.longestQuietMillis)
        .as("the longest time in which no call succeeded (a stalled harness shows here)")
        .isLessThan(QUIET_LIMIT_MILLIS);
    assertThat(report.faults).as("the nemesis struck").isNotEmpty();
    assertThat(report.brokenDuplicates).as("duplicates without an allowed cause").isEmpty();
    assertThat(report.badResults).as("results no send produced").isEmpty();
    assertThat(report.stuck).as("keys still held after the run settled").isEmpty();
  }

  /**
   * The joined-transaction mode (SPEC section 17): each call enqueues an outbox row inside the
   * application's transaction, and the checker allows no duplicate enqueue at all, kills included;
   * every call that committed or replayed got the id of its key's one row.
   */
  @ParameterizedTest
  @EnumSource(value = StoreKind.class, names = ".*_JOINED", mode = EnumSource.Mode.MATCH_ALL)
  void joinedEnqueuesAreNeverDuplicatedNorLostKillsIncluded(StoreKind store) throws Exception {
    assumeSelected(store);
    Path dir = runDirectory(store.name().toLowerCase());
    DuplicateChecker.Report report =
        new FaultRun(Settings.shortRun(store, SEED).lasting(SHORT), dir).run();
    record(store.name().toLowerCase(), report);

    assertThat(report.sends).as("outbox rows committed").isGreaterThan(50);
    assertThat(report.replays).as("committed enqueues replayed").isGreaterThan(50);
    assertThat(report.longestQuietMillis)
        .as("the longest time in which no call succeeded (a stalled harness shows here)")
        .isLessThan(QUIET_LIMIT_MILLIS);
    assertThat(report.faults)
        .as("the nemesis killed a client (seed %d's first fault is a kill; see docs)", SEED)
        .containsKey("KILL");
    assertThat(report.brokenDuplicates).as("duplicate enqueues").isEmpty();
    assertThat(report.badResults).as("lost enqueues, or ids never committed").isEmpty();
    assertThat(report.stuck).as("keys still locked after the run settled").isEmpty();
  }

  /**
   * What a run must at least have done to show that it ran: more than 50 sends and 50 replays on
   * every store but DynamoDB, whose calls cost far more (the AWS SDK's signing and JSON in every
   * client, a Node.js emulator behind the proxy): its 10-second runs, seed 17, on the 2-core
   * machine while other builds loaded it (load average 13 to 35), made 46 to 305 sends and 3 to
   * 1,503 replays (five runs). The checker's verdicts are the same for every store.
   */
  static long minimumSends(StoreKind store) {
    return store == StoreKind.DYNAMODB ? 20 : 51;
  }

  static long minimumReplays(StoreKind store) {
    return store == StoreKind.DYNAMODB ? 1 : 51;
  }

  /**
   * The same run on Redis, with a store whose lease renewals silently do nothing: sends longer than
   * the lease are taken over while their owner is alive and well, and the checker must see those
   * duplicates as unexplained.
   */
  @Test
  void theCheckerFailsABuildWhoseLeaseRenewalIsBroken() throws Exception {
    Path dir = runDirectory("redis-renewal-broken");
    DuplicateChecker.Report report =
        new FaultRun(
                Settings.shortRun(StoreKind.REDIS, SEED).lasting(BROKEN_RUN).broken("no-renewal"),
                dir)
            .run();
    record("redis, renewal broken on purpose", report);

    assertThat(report.ok()).isFalse();
    assertThat(report.brokenDuplicates).isNotEmpty();
  }

  /**
   * The joined run on PostgreSQL with a deliberately broken enqueue: the sender inserts the outbox
   * row on another connection in auto-commit, so the row commits apart from the key's record. A
   * kill inside the transaction, or the application's own rollback, then leaves a row whose key a
   * retry enqueues again, and the checker must fail the run.
   */
  @Test
  void theCheckerFailsAJoinedRunWhoseOutboxRowCommitsApart() throws Exception {
    Path dir = runDirectory("postgresql_joined-outbox-apart");
    DuplicateChecker.Report report =
        new FaultRun(
                Settings.shortRun(StoreKind.POSTGRESQL_JOINED, SEED)
                    .lasting(BROKEN_JOINED_RUN)
                    .broken(OutboxFaultRunChild.SEPARATE_OUTBOX),
                dir)
            .run();
    record("postgresql_joined, outbox row committed apart on purpose", report);

    assertThat(report.ok()).isFalse();
    assertThat(report.brokenDuplicates).as("duplicate enqueues").isNotEmpty();
  }

  /** Runs only the stores named in {@code -Dfaultrun.stores}, if it is set. */
  private static void assumeSelected(StoreKind store) {
    String only = System.getProperty("faultrun.stores");
    org.junit.jupiter.api.Assumptions.assumeTrue(
        only == null || java.util.List.of(only.split(",")).contains(store.name().toLowerCase()),
        "faultrun.stores=" + only);
  }

  /** The run's history stays in target/fault-runs/NAME for reading after a failure. */
  private static Path runDirectory(String name) throws IOException {
    Path dir = Path.of("target", "fault-runs", name + "-" + SEED);
    if (Files.exists(dir)) {
      try (var files = Files.list(dir)) {
        for (Path file : files.toList()) {
          Files.delete(file);
        }
      }
    }
    return Files.createDirectories(dir);
  }

  private static void record(String store, DuplicateChecker.Report report) throws IOException {
    System.out.println(DuplicateChecker.Report.header());
    System.out.println(report.row(store));
    System.out.println(report);
    Path table = Path.of("target", "fault-runs.md");
    Files.createDirectories(table.getParent());
    if (!Files.exists(table)) {
      Files.writeString(
          table,
          "seed "
              + SEED
              + ", "
              + SHORT.toSeconds()
              + " s per store\n\n"
              + DuplicateChecker.Report.header()
              + "\n");
    }
    Files.writeString(table, report.row(store) + "\n", StandardOpenOption.APPEND);
  }
}
