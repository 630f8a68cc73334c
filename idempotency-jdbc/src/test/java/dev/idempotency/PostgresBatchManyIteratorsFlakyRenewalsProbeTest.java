package dev.idempotency;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.jdbc.JdbcKeyStore;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.BatchManyIteratorsFlakyRenewalsContract;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;

/**
 * probeT (SPEC 1): {@code BatchManyIteratorsFlakyRenewalsProbeTest} on PostgreSQL 17 (embedded; the
 * JDBC store on the guard's clock, moved by the sending threads forward and now and then back):
 * four threads iterate one batch while a fifth of the renewals never reach the database and an
 * eighth are applied with their answer lost; 300 rounds of eight keys. The same rules: no key
 * handed out twice or with a stored lease ending too soon, none lapsed or marked lost after its
 * hand-out (unless the database refused a renewal of it), every key reported sent COMPLETED and
 * replayed to guard B, every other key released or taken back. In package {@code dev.idempotency}
 * to read the claim's state. Passes on probeT 35e4cb8 (10 to 22 s with the server's start: about
 * 2,200 keys handed out, 175 lapsed, 110 renewals failed); unlike the in-memory probe it did not
 * catch the pre-123d5c2 {@code LeaseKeeper.renewNow} (losing every claim of a failed renewal) in 1
 * run. Tagged extended for its length.
 *
 * <p>The case is {@link BatchManyIteratorsFlakyRenewalsContract} (the store test kit).
 */
class PostgresBatchManyIteratorsFlakyRenewalsProbeTest
    extends BatchManyIteratorsFlakyRenewalsContract {

  private EmbeddedPostgres postgres;
  private HikariDataSource pool;

  PostgresBatchManyIteratorsFlakyRenewalsProbeTest() {
    super("pg-", "PostgreSQL ", 300, 40);
  }

  @Override
  protected KeyStore newStore() {
    try {
      postgres = EmbeddedPostgres.builder().setPGStartupWait(Duration.ofSeconds(120)).start();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(postgres.getJdbcUrl("postgres", "postgres"));
    config.setMaximumPoolSize(8);
    pool = new HikariDataSource(config);
    return JdbcKeyStore.builder(pool)
        .tableName("idem_probet_flaky")
        .createSchemaIfMissing(true)
        .build();
  }

  @Override
  protected void closeStore(KeyStore store) {
    pool.close();
    try {
      postgres.close();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** A fifth of the renewals never reach the database. */
  @Override
  protected int beforeRenewal() {
    int draw = draw();
    if (draw < 20) {
      fail("the database did not answer in time");
    }
    return draw;
  }

  /** An eighth are applied, their answer lost (a timeout after the commit). */
  @Override
  protected void afterRenewal(int draw) {
    if (draw < 33) {
      fail("the answer of the database was lost");
    }
    answered();
  }

  @Override
  protected boolean claimLost(Batch.Item item) {
    return item.claim.isLost();
  }

  @Override
  protected String keyId(Batch.Item item) {
    return item.call.keyId;
  }
}
