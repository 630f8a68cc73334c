package dev.idempotency.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.autoconfigure.IdempotencyAutoConfiguration;
import dev.idempotency.spring.autoconfigure.IdempotencyMessagingAutoConfiguration;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.core.NestedExceptionUtils;

/**
 * The set-up shared by the tests of two beans with one default name ({@link
 * TwoBeansOfOneClassTest}, {@link SecondBeanTypeKnownLaterTest}): the starter on the in-memory
 * store, and the check that a start failed saying why.
 */
final class DefaultNameClashes {

  private DefaultNameClashes() {}

  /** The starter's method and listener auto-configuration on the in-memory store. */
  static ApplicationContextRunner runner() {
    return new ApplicationContextRunner()
        .withConfiguration(
            AutoConfigurations.of(
                dev.idempotency.spring.autoconfigure.JacksonAutoConfigurations.jackson(),
                IdempotencyAutoConfiguration.class,
                IdempotencyMessagingAutoConfiguration.class))
        .withPropertyValues("idempotency.store=memory");
  }

  /**
   * Starts {@code runner} with {@code configuration} and checks the start failed, its most specific
   * cause's message containing every one of {@code messageParts}.
   */
  static void assertStartFails(
      ApplicationContextRunner runner, Class<?> configuration, String... messageParts) {
    runner
        .withUserConfiguration(configuration)
        .run(
            context -> {
              assertThat(context).as("the start fails naming both beans").hasFailed();
              assertThat(NestedExceptionUtils.getMostSpecificCause(context.getStartupFailure()))
                  .hasMessageContainingAll(messageParts);
            });
  }
}
