package dev.idempotency.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.spring.app.NotifyTestApplication;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.h2.jdbcx.JdbcDataSource;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.dao.DataAccessException;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.transaction.annotation.EnableTransactionManagement;
import org.springframework.transaction.annotation.Transactional;

/**
 * {@link Idempotent} on a {@code @Transactional} method, with Spring's real transaction manager on
 * H2 (also the idempotency store): the guard runs outside the transaction, so a commit that fails
 * releases the key and the retry runs the method again, instead of replaying a result that was
 * rolled back.
 */
@SpringBootTest(
    classes = {NotifyTestApplication.class, TransactionalIdempotentTest.Config.class},
    webEnvironment = SpringBootTest.WebEnvironment.NONE)
class TransactionalIdempotentTest {

  /**
   * Fails the commit of the next transaction that wrote to the ledger, as a lost database would.
   */
  static final AtomicBoolean FAIL_NEXT_LEDGER_COMMIT = new AtomicBoolean();

  /** A bean whose guarded method writes in a transaction. */
  public static class Ledger {
    private final JdbcTemplate jdbc;
    private final AtomicInteger runs = new AtomicInteger();

    public Ledger(JdbcTemplate jdbc) {
      this.jdbc = jdbc;
    }

    int runs() {
      return runs.get();
    }

    @Idempotent(key = "#paymentId")
    @Transactional
    public String record(String paymentId) {
      int run = runs.incrementAndGet();
      jdbc.update("insert into ledger (payment_id, run) values (?, ?)", paymentId, run);
      return "entry of " + paymentId + " at run " + run;
    }
  }

  /**
   * As many applications do, it enables transactions itself, so Spring's transaction advisor is
   * registered before any auto-configuration's advisor: without an explicit order it would be the
   * outer one.
   */
  @TestConfiguration
  @EnableTransactionManagement
  @Import(Ledger.class)
  static class Config {
    /** H2, with connections whose commit can be made to fail after a ledger write. */
    @Bean
    DataSource dataSource() {
      JdbcDataSource h2 = new JdbcDataSource();
      h2.setURL("jdbc:h2:mem:transactions;DB_CLOSE_DELAY=-1");
      h2.setUser("sa");
      return (DataSource)
          Proxy.newProxyInstance(
              DataSource.class.getClassLoader(),
              new Class<?>[] {DataSource.class},
              (proxy, method, args) -> {
                Object result = invoke(h2, method, args);
                return result instanceof Connection connection ? failing(connection) : result;
              });
    }

    private static Connection failing(Connection connection) {
      AtomicBoolean wroteLedger = new AtomicBoolean();
      InvocationHandler handler =
          (proxy, method, args) -> {
            if (method.getName().equals("prepareStatement")
                && String.valueOf(args[0]).contains("ledger")) {
              wroteLedger.set(true);
            }
            if (method.getName().equals("commit")
                && wroteLedger.getAndSet(false)
                && FAIL_NEXT_LEDGER_COMMIT.getAndSet(false)) {
              throw new SQLException("the commit failed (test)", "08006");
            }
            return invoke(connection, method, args);
          };
      return (Connection)
          Proxy.newProxyInstance(
              Connection.class.getClassLoader(), new Class<?>[] {Connection.class}, handler);
    }

    private static Object invoke(Object target, java.lang.reflect.Method method, Object[] args)
        throws Throwable {
      try {
        return method.invoke(target, args);
      } catch (InvocationTargetException e) {
        throw e.getCause();
      }
    }
  }

  @Autowired Ledger ledger;
  @Autowired JdbcTemplate jdbc;

  int rows(String paymentId) {
    jdbc.execute("create table if not exists ledger (payment_id varchar(64), run int)");
    return jdbc.queryForObject(
        "select count(*) from ledger where payment_id = ?", Integer.class, paymentId);
  }

  @Test
  void aFailedCommitReleasesTheKeySoTheRetryRunsAgainAndIsThenReplayed() {
    String payment = "pay_" + UUID.randomUUID();
    assertThat(rows(payment)).isZero();
    int before = ledger.runs();

    FAIL_NEXT_LEDGER_COMMIT.set(true);
    assertThatThrownBy(() -> ledger.record(payment))
        .as("Spring's JdbcTransactionManager reports the failed commit")
        .isInstanceOf(DataAccessException.class)
        .hasMessageContaining("the commit failed (test)");
    assertThat(rows(payment)).as("rolled back").isZero();

    String retry = ledger.record(payment);
    String repeat = ledger.record(payment);

    assertThat(retry).isEqualTo("entry of " + payment + " at run " + (before + 2));
    assertThat(rows(payment)).as("committed once, by the retry").isEqualTo(1);
    assertThat(repeat).as("replayed: the recorded outcome is the committed one").isEqualTo(retry);
    assertThat(ledger.runs() - before).isEqualTo(2);
  }
}
