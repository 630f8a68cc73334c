package dev.idempotency.spring.messaging;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.Idempotent;
import dev.idempotency.spring.autoconfigure.IdempotencyAutoConfiguration;
import dev.idempotency.spring.autoconfigure.IdempotencyMessagingAutoConfiguration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

/**
 * A listener whose key cannot be worked out fails the application at startup, naming the method and
 * the problem: no key at all (the broker's message id is never the default), a key expression that
 * is wrong, both a key and a header, a name that cannot be an operation.
 */
class IdempotentListenerStartupTest {

  final ApplicationContextRunner runner =
      new ApplicationContextRunner()
          .withConfiguration(
              AutoConfigurations.of(
                  IdempotencyAutoConfiguration.class, IdempotencyMessagingAutoConfiguration.class))
          .withPropertyValues("idempotency.store=memory");

  static class DefaultHeader {
    @IdempotentListener
    public void onEvent(String event) {}
  }

  static class KeyAndHeader {
    @IdempotentListener(key = "#event", header = "X-Key")
    public void onEvent(String event) {}
  }

  static class MisspelledParameter {
    @IdempotentListener(key = "#evnt")
    public void onEvent(String event) {}
  }

  static class ParameterInABatch {
    @IdempotentListener(key = "#events.orderId")
    public void onEvents(List<String> events) {}
  }

  static class BadName {
    @IdempotentListener(key = "#event", name = "order shipped")
    public void onEvent(String event) {}
  }

  static class BothAnnotations {
    @IdempotentListener(key = "#event")
    @Idempotent(key = "#event")
    public void onEvent(String event) {}
  }

  static class Fine {
    @IdempotentListener(key = "#event + ':' + #headers['x-tenant']")
    public void onEvent(String event) {}

    @IdempotentListener(key = "#payload.length() > 3 ? #payload : #root")
    public void onEvents(List<String> events) {}
  }

  private void failsWith(Class<?> bean, String... message) {
    runner
        .withBean(bean)
        .run(
            context -> {
              assertThat(context).hasFailed();
              assertThat(context.getStartupFailure())
                  .rootCause()
                  .hasMessageContaining("@IdempotentListener on " + bean.getName())
                  .hasMessageContainingAll(message);
            });
  }

  @Test
  void aListenerWithNoKeyConfiguredFails() {
    runner
        .withPropertyValues("idempotency.messaging.header=")
        .withBean(DefaultHeader.class)
        .run(
            context -> {
              assertThat(context).hasFailed();
              assertThat(context.getStartupFailure())
                  .rootCause()
                  .hasMessageContaining("names no key")
                  .hasMessageContaining("message id or offset is never used");
            });
  }

  @Test
  void aListenerWithoutAKeyExpressionTakesTheIdempotencyKeyHeader() {
    runner.withBean(DefaultHeader.class).run(context -> assertThat(context).hasNotFailed());
  }

  @Test
  void aKeyAndAHeaderTogetherFail() {
    failsWith(KeyAndHeader.class, "names both a key expression and a header");
  }

  @Test
  void aKeyNamingNoParameterFails() {
    failsWith(MisspelledParameter.class, "#evnt is not a parameter", "event");
  }

  @Test
  void aBatchKeyNamingTheListParameterFails() {
    failsWith(ParameterInABatch.class, "evaluated per message");
  }

  @Test
  void aNameThatCannotBeAnOperationFails() {
    failsWith(BadName.class, "'order shipped' must be 1 to 64 characters");
  }

  @Test
  void bothAnnotationsOnOneMethodFail() {
    runner
        .withBean(BothAnnotations.class)
        .run(
            context -> {
              assertThat(context).hasFailed();
              assertThat(context.getStartupFailure())
                  .rootCause()
                  .hasMessageContaining("@IdempotentListener and @Idempotent on");
            });
  }

  @Test
  void rightAnnotationsStart() {
    runner.withBean(Fine.class).run(context -> assertThat(context).hasNotFailed());
  }
}
