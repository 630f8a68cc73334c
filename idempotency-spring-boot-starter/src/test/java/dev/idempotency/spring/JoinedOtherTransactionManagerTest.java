package dev.idempotency.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.spring.app.NotifyTestApplication;
import java.util.UUID;
import org.h2.jdbcx.JdbcDataSource;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.context.annotation.Import;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DataSourceTransactionManager;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * Regression test (issue 38, SPEC 17: a transaction on another DataSource is refused, never
 * silently ignored). The caller's transaction is on another DataSource; before the joining method,
 * it read the store's DataSource through a {@code JdbcTemplate}, which, with synchronization
 * active, binds a plain (non-transactional) connection holder for the store's DataSource. {@code
 * JoinedCalls} takes that holder for a transaction on the store's DataSource. With the pool's
 * auto-commit off (a common Hikari setting beside JPA) nothing refuses the join: the method runs,
 * the caller gets the row's id, and when the other transaction completes Spring closes the store's
 * connection, which the pool rolls back. The key's record and the row are gone: the caller was told
 * "done" with nothing committed, and the retry enqueues again. That was so before the fix; now such
 * a holder is refused.
 */
@SpringBootTest(
    classes = {NotifyTestApplication.class, JoinedOtherTransactionManagerTest.Config.class},
    properties = {
      "spring.datasource.url=jdbc:h2:mem:joined-other-tm;DB_CLOSE_DELAY=-1",
      "spring.datasource.hikari.auto-commit=false"
    })
class JoinedOtherTransactionManagerTest {

  @TestConfiguration
  @Import(JoinedOutboxApp.Outbox.class)
  static class Config {}

  @Autowired JdbcTemplate jdbc;
  @Autowired JoinedOutboxApp.Outbox outbox;
  @Autowired IdempotencyGuard guard;

  @Test
  void aTransactionOfAnotherDataSourceIsRefusedThoughTheStoresConnectionWasRead() {
    jdbc.execute(
        "create table if not exists joined_outbox"
            + " (id varchar(64) primary key, request_key varchar(200), phone varchar(32))");
    JdbcDataSource otherDatabase = new JdbcDataSource();
    otherDatabase.setURL("jdbc:h2:mem:joined-other-tm-2;DB_CLOSE_DELAY=-1");
    TransactionTemplate otherTransaction =
        new TransactionTemplate(new DataSourceTransactionManager(otherDatabase));
    String key = "k-" + UUID.randomUUID();

    assertThatThrownBy(
            () ->
                otherTransaction.execute(
                    status -> {
                      jdbc.queryForObject("select count(*) from joined_outbox", Integer.class);
                      return outbox.enqueue(key, "555");
                    }))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("does not hold the idempotency store's DataSource");

    // failed before the fix: accepted, answered with an id, and nothing of it committed
    assertThat(
            jdbc.queryForObject(
                "select count(*) from joined_outbox where request_key = ?", Integer.class, key))
        .as("outbox rows of a refused call")
        .isZero();
    assertThat(guard.find(IdempotencyKey.of("joined.enqueue", key)))
        .as("the key's record of a refused call")
        .isEmpty();
  }
}
