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

  static class Email {
    static class OrderShippedListener {
      @IdempotentListener
      public void onMessage(String event) {}
    }
  }

  static class Sms {
    static class OrderShippedListener {
      @IdempotentListener
      public void onMessage(String event) {}
    }
  }

  static class Api {
    static class OrderShippedListener {
      @Idempotent(key = "#event")
      public void onMessage(String event) {}
    }
  }

  static class ShortTtl {
    @IdempotentListener(key = "#event", ttl = "30s")
    public void onEvent(String event) {}
  }

  /** A listener that is also {@code @Transactional}, counting its runs. */
  static class TransactionalListener {
    final java.util.concurrent.atomic.AtomicInteger runs =
        new java.util.concurrent.atomic.AtomicInteger();

    @IdempotentListener(key = "#event")
    @org.springframework.transaction.annotation.Transactional
    public void onEvent(String event) {
      runs.incrementAndGet();
    }

    public int runs() {
      return runs.get(); // through the proxy, whose own fields are not the bean's
    }
  }

  /** Transactions whose commit fails when told to. */
  static class FailingCommits
      extends org.springframework.transaction.support.AbstractPlatformTransactionManager {
    final java.util.concurrent.atomic.AtomicBoolean failNext =
        new java.util.concurrent.atomic.AtomicBoolean();

    @Override
    protected Object doGetTransaction() {
      return new Object();
    }

    @Override
    protected void doBegin(
        Object transaction, org.springframework.transaction.TransactionDefinition definition) {}

    @Override
    protected void doCommit(
        org.springframework.transaction.support.DefaultTransactionStatus status) {
      if (failNext.getAndSet(false)) {
        throw new org.springframework.transaction.TransactionSystemException("commit failed");
      }
    }

    @Override
    protected void doRollback(
        org.springframework.transaction.support.DefaultTransactionStatus status) {}
  }

  @org.springframework.context.annotation.Configuration(proxyBeanMethods = false)
  @org.springframework.transaction.annotation.EnableTransactionManagement
  static class Transactions {
    @org.springframework.context.annotation.Bean
    FailingCommits transactionManager() {
      return new FailingCommits();
    }
  }

  /** An application that puts its transactions first, outside everything. */
  @org.springframework.context.annotation.Configuration(proxyBeanMethods = false)
  @org.springframework.transaction.annotation.EnableTransactionManagement(order = 0)
  static class TransactionsFirst {
    @org.springframework.context.annotation.Bean
    FailingCommits transactionManager() {
      return new FailingCommits();
    }
  }

  @Test
  void twoListenersWithOneDefaultNameFailTheStartNamingBoth() {
    runner
        .withBean(Email.OrderShippedListener.class)
        .withBean(Sms.OrderShippedListener.class)
        .run(
            context -> {
              assertThat(context).hasFailed();
              assertThat(context.getStartupFailure())
                  .rootCause()
                  .hasMessageContainingAll(
                      "have the same default name 'OrderShippedListener.onMessage'",
                      Email.OrderShippedListener.class.getName() + ".onMessage(String)",
                      Sms.OrderShippedListener.class.getName() + ".onMessage(String)",
                      "@IdempotentListener(name = ");
            });
  }

  /** SPEC 13 and 15: one key namespace, whichever annotation each method has. */
  @Test
  void anIdempotentMethodAndAListenerWithOneDefaultNameFailTheStartNamingBoth() {
    for (Class<?>[] order :
        List.of(
            new Class<?>[] {Api.OrderShippedListener.class, Sms.OrderShippedListener.class},
            new Class<?>[] {Sms.OrderShippedListener.class, Api.OrderShippedListener.class})) {
      runner
          .withBean(order[0])
          .withBean(order[1])
          .run(
              context -> {
                assertThat(context).hasFailed();
                assertThat(context.getStartupFailure())
                    .rootCause()
                    .hasMessageContainingAll(
                        "have the same default name 'OrderShippedListener.onMessage'",
                        "@Idempotent method "
                            + Api.OrderShippedListener.class.getName()
                            + ".onMessage(String)",
                        "@IdempotentListener method "
                            + Sms.OrderShippedListener.class.getName()
                            + ".onMessage(String)",
                        "@Idempotent(name = ",
                        "@IdempotentListener(name = ");
              });
    }
  }

  @Test
  void aListenerTtlNotLongerThanTheLeaseFailsTheStart() {
    runner
        .withPropertyValues("idempotency.lease=PT30S")
        .withBean(ShortTtl.class)
        .run(
            context -> {
              assertThat(context).hasFailed();
              assertThat(context.getStartupFailure())
                  .rootCause()
                  .hasMessageContainingAll(
                      "@IdempotentListener on " + ShortTtl.class.getName() + ".onEvent",
                      "ttl '30s' must be longer than the lease (idempotency.lease = PT30S)");
            });
  }

  @Test
  void aDefaultTtlNotLongerThanTheLeaseFailsTheStartOfAListenerThatNamesNone() {
    runner
        .withPropertyValues("idempotency.lease=PT1M", "idempotency.default-ttl=1m")
        .withBean(DefaultHeader.class)
        .run(
            context -> {
              assertThat(context).hasFailed();
              assertThat(context.getStartupFailure())
                  .rootCause()
                  .hasMessageContainingAll(
                      "@IdempotentListener on " + DefaultHeader.class.getName() + ".onEvent",
                      "idempotency.default-ttl (PT1M)",
                      "must be longer than the lease (idempotency.lease = PT1M)");
            });
  }

  @Test
  void theListenerAdvisorIsOrderedOutsideTransactions() {
    runner
        .withBean(Fine.class)
        .run(
            context ->
                assertThat(context.getBean(IdempotentListenerAdvisor.class).getOrder())
                    .isEqualTo(dev.idempotency.spring.IdempotentMethodAdvisor.DEFAULT_ORDER)
                    .isLessThan(org.springframework.core.Ordered.LOWEST_PRECEDENCE));
  }

  @Test
  void aTransactionalListenerWhoseCommitFailsIsReleasedAndRunsAgain() {
    runner
        .withUserConfiguration(Transactions.class)
        .withBean(TransactionalListener.class)
        .run(
            context -> {
              TransactionalListener listener = context.getBean(TransactionalListener.class);
              FailingCommits transactions = context.getBean(FailingCommits.class);
              transactions.failNext.set(true);
              org.assertj.core.api.Assertions.assertThatThrownBy(() -> listener.onEvent("order-1"))
                  .hasMessageContaining("commit failed");
              listener.onEvent("order-1");
              assertThat(listener.runs())
                  .as("the failed commit released the key: the redelivery ran the listener")
                  .isEqualTo(2);
              listener.onEvent("order-1");
              assertThat(listener.runs()).as("the committed run was recorded").isEqualTo(2);
            });
  }

  @Test
  void transactionsOrderedOutsideTheListenerGuardFailTheStart() {
    runner
        .withUserConfiguration(TransactionsFirst.class)
        .withBean(Fine.class)
        .run(
            context -> {
              assertThat(context).hasFailed();
              assertThat(
                      org.springframework.core.NestedExceptionUtils.getMostSpecificCause(
                          context.getStartupFailure()))
                  .hasMessageContaining("transaction advisor has order 0")
                  .hasMessageContaining("@Transactional would run outside @IdempotentListener");
            });
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
