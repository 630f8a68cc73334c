package dev.idempotency.jdbc;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.Batch;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.ResultCodec;
import dev.idempotency.tck.MutableClock;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.SQLTransientConnectionException;
import java.time.Duration;
import java.time.Instant;
import java.util.Iterator;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.assertj.core.api.SoftAssertions;
import org.h2.jdbcx.JdbcDataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * probeO (SPEC 1): {@code dev.idempotency.BatchConcurrentHandOutFailedRenewalProbeTest} on H2 (the
 * JDBC store on the guard's clock), with the failure at the connection: thread 1's hand-out check
 * renews the batch's keys, its statement waits for the test and then fails (as a connection that
 * times out does, every attempt on that thread); meanwhile thread 2, after a 1 s clock step back,
 * hands out key a, which that failure then marks lost. The keeper never renews a again, thread 1
 * lapses it, its lease runs out mid-send and guard B (same database) sends it again.
 */
class H2BatchConcurrentHandOutFailedRenewalProbeTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofSeconds(8);
  static final String FAILING_THREAD = "probeO-h2-batch-hand-out-1";

  final MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final CountDownLatch renewalSent = new CountDownLatch(1);
  final CountDownLatch failRenewal = new CountDownLatch(1);
  final JdbcDataSource h2 = new JdbcDataSource();

  {
    h2.setURL(
        "jdbc:h2:mem:probeo_batch_"
            + UUID.randomUUID().toString().replace("-", "")
            + ";DB_CLOSE_DELAY=-1");
  }

  final ForwardingDataSource failingOnThread1 =
      new ForwardingDataSource(h2) {
        @Override
        Connection wrap(Connection connection) {
          return (Connection)
              Proxy.newProxyInstance(
                  Connection.class.getClassLoader(),
                  new Class<?>[] {Connection.class},
                  (proxy, method, args) -> {
                    if (method.getName().equals("prepareStatement")
                        && Thread.currentThread().getName().equals(FAILING_THREAD)) {
                      renewalSent.countDown();
                      failRenewal.await(30, TimeUnit.SECONDS);
                      throw new SQLTransientConnectionException("the database did not answer");
                    }
                    try {
                      return method.invoke(connection, args);
                    } catch (InvocationTargetException e) {
                      throw e.getCause();
                    }
                  });
        }
      };
  final IdempotencyGuard guardA = guard(failingOnThread1);
  final IdempotencyGuard guardB = guard(h2);

  IdempotencyGuard guard(javax.sql.DataSource dataSource) {
    return IdempotencyGuard.builder()
        .store(
            JdbcKeyStore.builder(dataSource)
                .tableName("idem_probeo_batch")
                .createSchemaIfMissing(true)
                .build())
        .clock(clock)
        .lease(LEASE)
        .inFlightWait(Duration.ZERO)
        .build();
  }

  @AfterEach
  void close() {
    failRenewal.countDown();
    guardA.close();
    guardB.close();
  }

  // Was an open finding, fixed by fixlost (a batch key handed out is marked started, and a
  // renewal the store fails no longer loses a started claim: Claim.loseUnlessStarted). It read:
  // open finding (probeO, low-medium, as the in-memory probe of the same name) on feb9e77, H2:
  // fails "[a sent once (B got: b-2)] Expecting AtomicInteger(2) to have value: 1" and "[a key
  // handed out is not lapsed] Expecting ... not to contain ..."; since BatchHandOut.lapse spares
  // keys handed out (probeO), only the first.
  @Test
  void aKeyHandedOutWhileAnotherThreadsRenewalFailsIsStillRenewed() throws Exception {
    String a = "h2-batch-concurrent-a:" + UUID.randomUUID();
    String y = "h2-batch-concurrent-y:" + UUID.randomUUID();
    AtomicInteger aSends = new AtomicInteger();
    SoftAssertions softly = new SoftAssertions();
    String b;
    try (Batch<String> batch =
        guardA.claimBatch(
            List.of(IdempotencyRequest.of(a, TTL), IdempotencyRequest.of(y, TTL)),
            ResultCodec.string())) {
      clock.advance(Duration.ofMillis(6500));
      Thread thread1 = new Thread(() -> batch.toSend().iterator().hasNext(), FAILING_THREAD);
      thread1.start();
      assertThat(renewalSent.await(30, TimeUnit.SECONDS))
          .as("thread 1 renews before its hand-out")
          .isTrue();

      clock.advance(Duration.ofMillis(-1000)); // an NTP step back
      Iterator<Batch.Item> toSend = batch.toSend().iterator();
      assertThat(toSend.hasNext()).isTrue();
      Batch.Item first = toSend.next();
      assertThat(first.key()).isEqualTo(a);
      aSends.incrementAndGet(); // a's provider call starts

      failRenewal.countDown();
      thread1.join(60_000);
      assertThat(thread1.isAlive()).isFalse();

      clock.advance(Duration.ofMillis(500)); // T0+6 s
      Instant leaseBefore = guardB.find(a).orElseThrow().leaseExpiresAt();
      long until = System.nanoTime() + Duration.ofSeconds(5).toNanos();
      while (System.nanoTime() - until < 0
          && !guardB.find(a).orElseThrow().leaseExpiresAt().isAfter(leaseBefore)) {
        Thread.sleep(20);
      }
      clock.advance(Duration.ofMillis(3000)); // T0+9 s: a's send still runs
      try {
        b = guardB.execute(a, TTL, ctx -> "b-" + aSends.incrementAndGet());
      } catch (IdempotencyInProgressException expected) {
        b = "in progress";
      }
      softly
          .assertThat(batch.lapsed())
          .as("a key handed out is not lapsed (lapsed keys 'were not sent')")
          .doesNotContain(a);
      batch.succeeded(first, "a-1");
      batch.record();
    }
    softly.assertThat(aSends).as("a sent once (B got: %s)", b).hasValue(1);
    softly.assertAll();
  }
}
