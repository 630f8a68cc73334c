package dev.idempotency.reliability;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.Outcome;
import dev.idempotency.ResultCodec;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.io.TempDir;

/**
 * Lease renewal across processes, on every shared store: a child JVM sends two keys with a 2 s
 * lease. One send takes five leases: this process, polling both keys all along, never takes either
 * over while the child lives, then replays the slow one's result. The other send never returns: the
 * child is killed with {@code SIGKILL}, and that key is taken over about one lease later (its last
 * renewal's lease), not five.
 */
class LeaseRenewalCrashTest {

  static final long LEASE_MS = 2_000;
  static final long SLOW_MS = 5 * LEASE_MS;

  /**
   * The four stores whose calls cost little at once (their children's output in one directory, a
   * file each): a run waits on its child, its slow send and its leases almost all the time (17 to
   * 19 s each, 91 s for the five one after another in the build), and each is timed against its own
   * child's lease keeper, not against the others.
   */
  @TestFactory
  Stream<DynamicTest> fourStoresAtOnce(@TempDir Path dir) {
    return OverlappedRuns.start(
        4,
        Duration.ofMinutes(8),
        List.of(
            OverlappedRuns.Run.of(
                "postgresql",
                () -> SharedStores.postgresql(spec -> renewedThenKilled("postgresql", spec, dir))),
            OverlappedRuns.Run.of(
                "mariadb",
                () -> SharedStores.mariadb(spec -> renewedThenKilled("mariadb", spec, dir))),
            OverlappedRuns.Run.of(
                "redis", () -> SharedStores.redis(spec -> renewedThenKilled("redis", spec, dir))),
            OverlappedRuns.Run.of(
                "redisCluster",
                () ->
                    SharedStores.redisCluster(
                        spec -> renewedThenKilled("redis cluster", spec, dir)))));
  }

  /**
   * DynamoDB on its own, as before: every call of its parent goes through dynalite (Node.js), and
   * beside the four others on the busy 2-core machine its polls took 800 ms each and the takeover
   * came 3.8 s after the kill (1.7 to 2.4 s alone).
   */
  @Test
  void dynamodb(@TempDir Path dir) throws Exception {
    SharedStores.dynamodb(spec -> renewedThenKilled("dynamodb", spec, dir));
  }

  private void renewedThenKilled(String name, String spec, Path dir) throws Exception {
    String slowKey = "renewed:slow:" + UUID.randomUUID();
    String hungKey = "renewed:hung:" + UUID.randomUUID();
    IdempotencyGuard parent =
        IdempotencyGuard.builder()
            .store(Stores.open(spec, 2))
            .lease(Duration.ofMillis(LEASE_MS))
            .inFlightWait(Duration.ZERO)
            .build();
    AtomicInteger parentSends = new AtomicInteger();
    long takenOverAfterKillMillis;
    try (ChildJvm child =
        new ChildJvm(
            dir,
            "renewed-sends",
            spec,
            slowKey,
            hungKey,
            Long.toString(LEASE_MS),
            Long.toString(SLOW_MS))) {
      child.await("SENDING", 180);
      long sendingAt = System.nanoTime();
      // Poll both keys until the slow one is replayed: it must only ever be in progress or the
      // child's own result, never taken over; the hung one must stay in progress throughout.
      int polls = 0;
      String replay = null;
      while (replay == null) {
        try {
          replay =
              parent.execute(
                  slowKey, ReliabilityChild.TTL, ctx -> "parent-" + parentSends.incrementAndGet());
        } catch (IdempotencyInProgressException stillSending) {
          assertThat(System.nanoTime() - sendingAt)
              .as("the slow send finishes")
              .isLessThan(TimeUnit.SECONDS.toNanos(120));
        }
        assertStillHeld(parent, hungKey, parentSends);
        polls++;
        Thread.sleep(100);
      }
      long slowMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - sendingAt);
      child.await("SLOW-DONE", 120);
      long heldUntil = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(2 * LEASE_MS);
      while (System.nanoTime() < heldUntil) {
        assertStillHeld(parent, hungKey, parentSends);
        Thread.sleep(100);
      }

      child.kill();
      long killedAt = System.nanoTime();
      Outcome<String> takeover = null;
      while (takeover == null) {
        try {
          takeover =
              parent.executeForOutcome(
                  IdempotencyRequest.of(hungKey, ReliabilityChild.TTL),
                  ResultCodec.string(),
                  ctx -> "parent-" + parentSends.incrementAndGet());
        } catch (IdempotencyInProgressException stillInLease) {
          assertThat(System.nanoTime() - killedAt)
              .as("taken over within five leases of the kill")
              .isLessThan(TimeUnit.MILLISECONDS.toNanos(SLOW_MS));
          Thread.sleep(20);
        }
      }
      takenOverAfterKillMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - killedAt);

      System.out.printf(
          "%s: a %d ms send under a %d ms lease was never taken over (%d polls); after SIGKILL"
              + " the hung send's key was taken over %d ms later%n",
          name, slowMillis, LEASE_MS, polls, takenOverAfterKillMillis);
      assertThat(slowMillis).as("the slow send outlived its lease").isGreaterThan(4 * LEASE_MS);
      assertThat(replay).isEqualTo("n_child_slow");
      assertThat(takeover.attempt()).isEqualTo(2);
      assertThat(parentSends).as("the only send of this process is the takeover").hasValue(1);
      assertThat(takenOverAfterKillMillis)
          // one lease, give or take the last renewal's age and a busy machine's store answers
          // (3,055 ms seen on dynalite at a load of 30); five leases is what it must not be
          .as("about one lease after the kill: the last renewal's lease, not five")
          .isLessThanOrEqualTo(2 * LEASE_MS);
    }
  }

  /** The key is still held by the child: this process neither takes it over nor replays it. */
  private static void assertStillHeld(IdempotencyGuard parent, String key, AtomicInteger sends) {
    try {
      String result =
          parent.execute(key, ReliabilityChild.TTL, ctx -> "parent-" + sends.incrementAndGet());
      throw new AssertionError(
          "the child's send of " + key + " was taken over or ended early: " + result);
    } catch (IdempotencyInProgressException expected) {
      // still in progress under the child's renewed lease
    }
  }
}
