package dev.idempotency.spring.autoconfigure;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import dev.idempotency.testservers.Poll;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.SmartLifecycle;

/**
 * The starter closes the context's guard in a lifecycle phase of its own ({@link
 * GuardShutdown#PHASE}), so that its grace period (calls still running finish, their outcomes
 * recorded) runs before a connection that stops at phase 0, as Spring Data Redis's {@code
 * LettuceConnectionFactory} does. {@code MvcShutdownAfterTimeoutProbeTest} shows it on Redis.
 */
class GuardShutdownTest {

  private static final Duration WINDOW = Duration.ofHours(1);

  final ApplicationContextRunner runner =
      new ApplicationContextRunner()
          .withConfiguration(AutoConfigurations.of(IdempotencyAutoConfiguration.class))
          .withPropertyValues("idempotency.close-grace-period=20s");

  /** A store's connection that closes when its lifecycle stops, at phase 0 as Lettuce's factory. */
  static final class Connection implements SmartLifecycle {
    private final SwitchableKeyStore store;
    private volatile boolean running;

    Connection(SwitchableKeyStore store) {
      this.store = store;
    }

    @Override
    public void start() {
      running = true;
    }

    @Override
    public void stop() {
      store.down.set(true);
      running = false;
    }

    @Override
    public boolean isRunning() {
      return running;
    }

    @Override
    public int getPhase() {
      return 0;
    }
  }

  private static boolean isClosed(IdempotencyGuard guard) {
    try {
      guard.find("probe-" + UUID.randomUUID());
      return false;
    } catch (IllegalStateException closed) {
      return true;
    } catch (UnsupportedOperationException open) {
      return false; // the test's store reads no single records: the guard asked it, so is open
    }
  }

  @Test
  void aCallRunningWhenTheContextClosesIsRecordedBeforeAPhaseZeroConnectionStops() {
    SwitchableKeyStore store = new SwitchableKeyStore();
    String key = "shutdown-" + UUID.randomUUID();
    runner
        .withBean(KeyStore.class, () -> store)
        .withBean(Connection.class, () -> new Connection(store))
        .run(
            context -> {
              IdempotencyGuard guard = context.getBean(IdempotencyGuard.class);
              CompletableFuture<String> provider = new CompletableFuture<>();
              CompletionStage<String> call = guard.executeAsync(key, WINDOW, send -> provider);
              ConfigurableApplicationContext app =
                  (ConfigurableApplicationContext) context.getSourceApplicationContext();
              CompletableFuture<Void> closed = CompletableFuture.runAsync(app::close);
              // the guard's close begins (and waits for the call) while the connection still works
              Poll.within(Duration.ofSeconds(30)).until("the guard closing", () -> isClosed(guard));
              assertThat(store.down).as("the connection still works").isFalse();
              provider.complete("sent-1");
              closed.get(60, TimeUnit.SECONDS);
              assertThat(store.down).as("the connection stopped").isTrue();
              assertThat(call.toCompletableFuture().get(10, TimeUnit.SECONDS)).isEqualTo("sent-1");
            });
    // started again on the same store: the send was recorded and is replayed
    store.down.set(false);
    IdempotencyGuard restarted = IdempotencyGuard.builder().store(store).build();
    try (restarted) {
      assertThat(restarted.execute(key, WINDOW, send -> "sent-2")).isEqualTo("sent-1");
    }
  }

  @Test
  void aStopThatDoesNotCloseTheContextLeavesTheGuardOpen() {
    runner
        .withPropertyValues("idempotency.store=memory")
        .run(
            context -> {
              IdempotencyGuard guard = context.getBean(IdempotencyGuard.class);
              ConfigurableApplicationContext app =
                  (ConfigurableApplicationContext) context.getSourceApplicationContext();
              app.stop();
              assertThat(isClosed(guard)).isFalse();
              app.start();
              assertThat(guard.execute("stop-" + UUID.randomUUID(), WINDOW, send -> "sent"))
                  .isEqualTo("sent");
            });
  }

  @Test
  void closingAChildContextLeavesTheParentsGuardOpen() {
    runner
        .withPropertyValues("idempotency.store=memory")
        .run(
            parent -> {
              IdempotencyGuard guard = parent.getBean(IdempotencyGuard.class);
              runner
                  .withParent(parent.getSourceApplicationContext())
                  .run(child -> assertThat(child.getBean(IdempotencyGuard.class)).isSameAs(guard));
              assertThat(isClosed(guard)).as("after the child closed").isFalse();
              // the child's ContextClosedEvent reached the parent's listeners too: not the parent's
              ConfigurableApplicationContext app =
                  (ConfigurableApplicationContext) parent.getSourceApplicationContext();
              app.stop();
              assertThat(isClosed(guard)).as("after the parent's stop").isFalse();
              app.start();
            });
  }
}
