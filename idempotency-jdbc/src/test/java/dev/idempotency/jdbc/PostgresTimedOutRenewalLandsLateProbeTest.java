package dev.idempotency.jdbc;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.KeyStoreException;
import dev.idempotency.SendContext;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.tck.ForwardingKeyStore;
import dev.idempotency.tck.MutableClock;
import dev.idempotency.testservers.Poll;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * probeF (SPEC 1): {@code DynamoDbTimedOutRenewalLandsLateProbeTest} on PostgreSQL (embedded), the
 * JDBC store on the guard's clock (its default): {@code extend} sets {@code lease_until = :now +
 * lease} from the request's time, fenced by the owner token only, so the keeper's renewal the
 * client gave up on, landing after the newer renewal of {@code leaseHeld()}, moves the row's lease
 * back. The late request is delivered by the test from the store's own pool, as a statement the
 * server ran after its client had failed (a dropped connection whose statement still ran); see the
 * DynamoDB test for the timeline.
 *
 * <p>CONFIRMED on probeF (150c8df), 2.2 s: "sends (the keeper's timed-out renewal landed late:
 * [true]; B got: b-2; A got: a-sent) expected: 1 but was: 2". Severity medium, as on DynamoDB
 * (needs a renewal landing after a newer one and the renewals after it failing); with {@code
 * databaseTime(true)} the late request sets the lease from the database's clock, later, and does no
 * harm.
 *
 * <p>FIXED on fixlease: {@code extend} (and PostgreSQL's batch renewal) sets {@code lease_until =
 * GREATEST(lease_until, :now + lease)}, so the late request leaves the newer lease, and answers
 * renewed (the row is still the owner's).
 */
class PostgresTimedOutRenewalLandsLateProbeTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofSeconds(4);

  final MutableClock time = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final HikariDataSource pool = SharedPostgres.pool("late_renewal", 6);
  final JdbcKeyStore store = newStore(pool);
  final AtomicBoolean keeperTimesOut = new AtomicBoolean(true);
  final AtomicReference<List<ExtendRequest>> inTheNetwork = new AtomicReference<>();
  final ExecutorService providerThread =
      Executors.newSingleThreadExecutor(r -> new Thread(r, "provider-call"));

  final ForwardingKeyStore network =
      new ForwardingKeyStore(store) {
        @Override
        public List<Boolean> extendAll(List<ExtendRequest> requests) {
          if (keeperTimesOut.get() && Thread.currentThread().getName().contains("lease-keeper")) {
            inTheNetwork.compareAndSet(null, List.copyOf(requests));
            throw new KeyStoreException("probeF: the renewal timed out (sent, not answered)", null);
          }
          return delegate.extendAll(requests);
        }
      };

  final IdempotencyGuard guardA =
      IdempotencyGuard.builder()
          .store(network)
          .clock(time)
          .lease(LEASE)
          .inFlightWait(Duration.ZERO)
          .build();
  final IdempotencyGuard guardB =
      IdempotencyGuard.builder()
          .store(store)
          .clock(time)
          .lease(LEASE)
          .inFlightWait(Duration.ZERO)
          .build();

  static JdbcKeyStore newStore(HikariDataSource pool) {
    return JdbcKeyStore.builder(pool)
        .tableName("idem_late_renewal")
        .createSchemaIfMissing(true)
        .build();
  }

  @AfterEach
  void close() {
    keeperTimesOut.set(false);
    providerThread.shutdownNow();
    guardA.close();
    guardB.close();
    pool.close();
  }

  @Test
  void aTimedOutKeeperRenewalLandingAfterANewerOneDoesNotLetAnotherGuardTakeOverMidSend()
      throws Exception {
    String key = "late-renewal:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    AtomicReference<SendContext> context = new AtomicReference<>();
    CompletableFuture<String> providerCall = new CompletableFuture<>();
    CompletableFuture<String> a =
        guardA
            .executeAsync(
                key,
                TTL,
                ctx -> {
                  context.set(ctx);
                  return providerCall;
                })
            .toCompletableFuture();
    Poll.within(Duration.ofSeconds(60))
        .until("the keeper's renewal (request time T0) went out", () -> inTheNetwork.get() != null);

    time.advance(Duration.ofMillis(3_500));
    boolean held = providerThread.submit(() -> context.get().leaseHeld()).get(60, TimeUnit.SECONDS);
    assertThat(held).as("lease held at T0+3.5 s (renewed to T0+7.5 s)").isTrue();
    sends.incrementAndGet(); // A's provider call starts

    List<Boolean> landed = store.extendAll(inTheNetwork.get()); // the older request lands now
    time.advance(Duration.ofMillis(1_500)); // T0+5 s
    String b;
    try {
      b = guardB.execute(key, TTL, other -> "b-" + sends.incrementAndGet());
    } catch (IdempotencyInProgressException inProgress) {
      b = "in progress";
    }
    keeperTimesOut.set(false);
    providerCall.complete("a-sent");
    String outcomeOfA;
    try {
      outcomeOfA = a.get(60, TimeUnit.SECONDS);
    } catch (ExecutionException e) {
      outcomeOfA = e.getCause().toString();
    }
    assertThat(sends)
        .as(
            "sends (the keeper's timed-out renewal landed late: %s; B got: %s; A got: %s)",
            landed, b, outcomeOfA)
        .hasValue(1);
    assertThat(landed)
        .as("the late renewal of a claim still held, already leased further: renewed, not lost")
        .containsExactly(true);
  }
}
