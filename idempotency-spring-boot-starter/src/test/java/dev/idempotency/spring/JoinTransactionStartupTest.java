package dev.idempotency.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.autoconfigure.IdempotencyAutoConfiguration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import javax.sql.DataSource;
import org.h2.jdbcx.JdbcDataSource;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.FilteredClassLoader;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.core.NestedExceptionUtils;
import org.springframework.transaction.annotation.Transactional;

/**
 * {@code @Idempotent(joinTransaction = true)} where it cannot join: the application fails at
 * startup, naming the method and what to do.
 */
class JoinTransactionStartupTest {

  final ApplicationContextRunner runner =
      new ApplicationContextRunner()
          .withConfiguration(
              AutoConfigurations.of(
                  dev.idempotency.spring.autoconfigure.JacksonAutoConfigurations.jackson(),
                  IdempotencyAutoConfiguration.class));

  /** The same runner on the JDBC store over an in-memory H2. */
  ApplicationContextRunner onJdbc() {
    return runner
        .withBean(DataSource.class, JoinTransactionStartupTest::h2)
        .withPropertyValues("idempotency.store=jdbc", "idempotency.jdbc.initialize-schema=always");
  }

  private static DataSource h2() {
    JdbcDataSource h2 = new JdbcDataSource();
    h2.setURL("jdbc:h2:mem:join-startup;DB_CLOSE_DELAY=-1");
    h2.setUser("sa");
    return h2;
  }

  // public: under a FilteredClassLoader, the CGLIB proxy is defined in another class loader
  public static class Joining {
    @Idempotent(key = "#orderId", joinTransaction = true)
    public String send(String orderId) {
      return orderId;
    }
  }

  public static class NotJoining {
    @Idempotent(key = "#orderId")
    public String send(String orderId) {
      return orderId;
    }
  }

  static class JoiningStage {
    @Idempotent(key = "#orderId", joinTransaction = true)
    public CompletionStage<String> send(String orderId) {
      return CompletableFuture.completedFuture(orderId);
    }
  }

  static class JoiningMono {
    @Idempotent(key = "#orderId", joinTransaction = true)
    public reactor.core.publisher.Mono<String> send(String orderId) {
      return reactor.core.publisher.Mono.just(orderId);
    }
  }

  static class JoiningAndTransactional {
    @Idempotent(key = "#orderId", joinTransaction = true)
    @Transactional
    public String send(String orderId) {
      return orderId;
    }
  }

  @Transactional
  static class JoiningInTransactionalClass {
    @Idempotent(key = "#orderId", joinTransaction = true)
    public String send(String orderId) {
      return orderId;
    }
  }

  private static void failsWith(ApplicationContextRunner runner, Class<?> bean, String... message) {
    runner
        .withBean(bean)
        .run(
            context -> {
              assertThat(context).hasFailed();
              assertThat(NestedExceptionUtils.getMostSpecificCause(context.getStartupFailure()))
                  .isInstanceOf(IllegalStateException.class)
                  .hasMessageContaining(bean.getName() + ".send(..)")
                  .hasMessageContainingAll(message);
            });
  }

  @Test
  void aJoiningMethodOnTheJdbcStoreStarts() {
    onJdbc().withBean(Joining.class).run(context -> assertThat(context).hasNotFailed());
  }

  @Test
  void aJoiningMethodOnAStoreThatIsNotJdbcFails() {
    failsWith(
        runner.withPropertyValues("idempotency.store=memory"),
        Joining.class,
        "joinTransaction = true",
        "not the JDBC store");
  }

  @Test
  void aJoiningMethodReturningAStageOrAMonoFails() {
    failsWith(onJdbc(), JoiningStage.class, "joinTransaction = true", "CompletionStage");
    failsWith(onJdbc(), JoiningMono.class, "joinTransaction = true", "Mono");
  }

  @Test
  void aJoiningMethodThatIsItselfTransactionalFailsTellingToCallItInsideATransaction() {
    failsWith(
        onJdbc(),
        JoiningAndTransactional.class,
        "is itself @Transactional",
        "call it from inside a transaction");
    failsWith(
        onJdbc(),
        JoiningInTransactionalClass.class,
        "is itself @Transactional",
        "call it from inside a transaction");
  }

  @Test
  void aJoiningMethodWithoutSpringJdbcFailsTheStartNamingTheDependency() {
    failsWith(
        onJdbc().withClassLoader(new FilteredClassLoader("org.springframework.jdbc")),
        Joining.class,
        "joinTransaction = true",
        "spring-jdbc is not on the classpath",
        "org.springframework:spring-jdbc");
  }

  @Test
  void withoutSpringJdbcAMethodThatDoesNotJoinStillStarts() {
    onJdbc()
        .withClassLoader(new FilteredClassLoader("org.springframework.jdbc"))
        .withBean(NotJoining.class)
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              assertThat(context.getBean(NotJoining.class).send("o-1")).isEqualTo("o-1");
            });
  }
}
