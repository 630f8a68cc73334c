package dev.idempotency.reliability;

import static dev.idempotency.reliability.StalledClaims.TTL;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.KeyStoreException;
import dev.idempotency.jdbc.JdbcKeyStore;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * Issue 37 on a real PostgreSQL 17: a single claim whose insert the database ran and committed, but
 * whose answer was lost (a proxy drops the database's replies), fails with {@link
 * KeyStoreException} at the store's bound and sends nothing. Once the database answers again, the
 * committed {@code IN_PROGRESS} row must not hold the key for a lease (the default 30 s here): the
 * guard takes it back, fenced by its owner token, and a retry sends.
 */
class PostgresLostClaimAnswerTest {

  @Test
  void aClaimCommittedWhoseAnswerWasLostDoesNotHoldItsKey() throws Exception {
    try (EmbeddedPostgres postgres =
            EmbeddedPostgres.builder().setPGStartupWait(Duration.ofSeconds(120)).start();
        DelayProxy proxy = new DelayProxy(postgres.getPort())) {
      HikariConfig config = new HikariConfig();
      // a connection opened while the replies are dropped gives up on its handshake
      config.setJdbcUrl(
          "jdbc:postgresql://127.0.0.1:"
              + proxy.port()
              + "/postgres?user=postgres&loginTimeout=5&connectTimeout=5");
      config.setMaximumPoolSize(2);
      config.setInitializationFailTimeout(-1);
      try (HikariDataSource pool = new HikariDataSource(config)) {
        JdbcKeyStore store =
            JdbcKeyStore.builder(pool)
                .tableName("lost_claim_answers")
                .createSchemaIfMissing(true)
                .operationTimeout(Duration.ofSeconds(1))
                .connectionWait(Duration.ofSeconds(2))
                .build();
        IdempotencyGuard guard =
            IdempotencyGuard.builder().store(store).inFlightWait(Duration.ZERO).build();
        String key = "lost-claim-answer:" + System.nanoTime();
        AtomicInteger sends = new AtomicInteger();
        try {
          // the schema is made and a connection is in the pool, freshly used (no validation)
          assertThat(guard.execute("warm-up:" + key, TTL, ctx -> "warm")).isEqualTo("warm");
          proxy.dropReplies();
          assertThatThrownBy(() -> guard.execute(key, TTL, ctx -> "n_" + sends.incrementAndGet()))
              .isInstanceOf(KeyStoreException.class);
          assertThat(sends).as("nothing sent while the answers were lost").hasValue(0);
          proxy.pass();
          proxy.reset(); // connections opened meanwhile wait for answers that were dropped

          StalledClaims.assertTakenBackAndSentOnRetry(
              guard, key, sends, "the committed claim of a call that sent nothing");
        } finally {
          guard.close();
        }
      }
    }
  }
}
