package dev.idempotency.spring.autoconfigure;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.inmemory.InMemoryKeyStore;
import java.time.Duration;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * Probe (probeT) of {@code GuardShutdown} (481163a) with a guard that the application manages
 * itself. Before, the context closed a guard only as Spring destroys beans: a guard bean declared
 * {@code @Bean(destroyMethod = "")} (the application closes it), or one registered as a singleton
 * object (Spring never destroys those), stayed open when the context closed. {@code GuardShutdown}
 * closes every singleton {@link IdempotencyGuard} of the closing context whatever its destroy
 * method, so a guard shared with another application in the JVM (two sibling contexts, not a
 * hierarchy) is closed under the other: its calls fail with {@code IllegalStateException: the
 * IdempotencyGuard is closed}, which on a listener is not a deferral (a Kafka error handler with a
 * recoverer dead-letters the message without its send; SPEC 1, no lost send) and on an endpoint a
 * 500.
 *
 * <p>The control (passes) replaces the starter's bean {@code idempotencyGuardShutdown} with one
 * that does nothing: the guard with no destroy method is then left open, as before 481163a.
 *
 * <p>Open finding, low severity (a configuration the docs do not name; a lost send only through the
 * other application's error handling). Fails on Boot 3.5 and 4.0 (main dc550c5, 2/2 each; the
 * control passes on both): 'the guard the application closes itself, after the context closed'
 * expected false but was true, and 'the sibling's shared guard' likewise.
 *
 * <p>Fixed: {@code GuardShutdown} closes only the guards Spring would close on destroy (a bean
 * definition whose destroy method is inferred or {@code close}), earlier.
 */
class SharedGuardShutdownProbeTest {

  private static final Duration WINDOW = Duration.ofHours(1);

  private final ApplicationContextRunner runner =
      new ApplicationContextRunner()
          .withConfiguration(AutoConfigurations.of(IdempotencyAutoConfiguration.class));

  private static boolean isClosed(IdempotencyGuard guard) {
    try {
      guard.execute("probe-" + UUID.randomUUID(), WINDOW, send -> "sent");
      return false;
    } catch (IllegalStateException closed) {
      return true;
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class OwnGuard {
    static final IdempotencyGuard GUARD =
        IdempotencyGuard.builder().store(InMemoryKeyStore.builder().build()).build();

    @Bean(destroyMethod = "")
    IdempotencyGuard idempotencyGuard() {
      return GUARD;
    }
  }

  @Test
  void aGuardBeanWithoutADestroyMethodIsLeftToTheApplication() {
    runner
        .withUserConfiguration(OwnGuard.class)
        .run(
            context ->
                assertThat(context.getBean(IdempotencyGuard.class)).isSameAs(OwnGuard.GUARD));
    assertThat(isClosed(OwnGuard.GUARD))
        .as("the guard the application closes itself, after the context closed")
        .isFalse();
  }

  @Test
  void controlWithoutTheStartersShutdownBeanTheGuardIsLeftOpen() {
    IdempotencyGuard guard =
        IdempotencyGuard.builder().store(InMemoryKeyStore.builder().build()).build();
    runner
        .withBean(
            "idempotencyGuard",
            IdempotencyGuard.class,
            () -> guard,
            d -> d.setDestroyMethodName(""))
        .withBean("idempotencyGuardShutdown", Object.class, Object::new)
        .run(context -> assertThat(context.getBean(IdempotencyGuard.class)).isSameAs(guard));
    assertThat(isClosed(guard))
        .as("the guard with no destroy method, after the context closed")
        .isFalse();
    guard.close();
  }

  @Test
  void closingOneApplicationLeavesASiblingsSharedGuardOpen() {
    IdempotencyGuard shared =
        IdempotencyGuard.builder().store(InMemoryKeyStore.builder().build()).build();
    ApplicationContextRunner withShared =
        runner.withInitializer(
            context -> context.getBeanFactory().registerSingleton("sharedGuard", shared));
    withShared.run(
        sibling -> {
          withShared.run(
              first -> assertThat(first.getBean(IdempotencyGuard.class)).isSameAs(shared));
          assertThat(isClosed(shared))
              .as("the sibling's shared guard, after the other application closed")
              .isFalse();
        });
    shared.close();
  }
}
