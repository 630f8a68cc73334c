package dev.idempotency.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.autoconfigure.IdempotencyAutoConfiguration;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

/** A wrong {@link Idempotent} annotation fails the application at startup, saying what is wrong. */
class IdempotentMethodStartupTest {

  final ApplicationContextRunner runner =
      new ApplicationContextRunner()
          .withConfiguration(
              AutoConfigurations.of(
                  dev.idempotency.spring.autoconfigure.JacksonAutoConfigurations.jackson(),
                  IdempotencyAutoConfiguration.class))
          .withPropertyValues("idempotency.store=memory");

  static class BadSyntax {
    @Idempotent(key = "#orderId +")
    public String send(String orderId) {
      return orderId;
    }
  }

  static class MisspelledParameter {
    @Idempotent(key = "#orderIdd")
    public String send(String orderId) {
      return orderId;
    }
  }

  static class IndexPastTheParameters {
    @Idempotent(key = "#p1")
    public String send(String orderId) {
      return orderId;
    }
  }

  static class BeanReferenceKey {
    @Idempotent(key = "@keys.of(#orderId)")
    public String send(String orderId) {
      return orderId;
    }
  }

  /** A record whose getter may throw: a look-up that fails once (a service timed out). */
  public record Order(String id, boolean lookUpFails) {
    public String getRef() {
      if (lookUpFails) {
        throw new IllegalStateException("the look-up timed out");
      }
      return "ref-" + id;
    }
  }

  static class KeyFromAPart {
    final java.util.concurrent.atomic.AtomicInteger runs =
        new java.util.concurrent.atomic.AtomicInteger();

    @Idempotent(key = "#p0.split('\\|')[1]")
    public String send(String event) {
      return "sent-" + runs.incrementAndGet();
    }

    @Idempotent(key = "#order.ref")
    public String sendOrder(Order order) {
      return "sent-" + runs.incrementAndGet();
    }

    public int runs() {
      return runs.get();
    }
  }

  static class BadTtl {
    @Idempotent(key = "#orderId", ttl = "a day")
    public String send(String orderId) {
      return orderId;
    }
  }

  /** Mono implements CorePublisher, which extends Publisher: not a direct interface. */
  static class ReturnsMono {
    @Idempotent(key = "#orderId")
    public reactor.core.publisher.Mono<String> send(String orderId) {
      return reactor.core.publisher.Mono.just(orderId);
    }
  }

  static class ReturnsFlux {
    @Idempotent(key = "#orderId")
    public reactor.core.publisher.Flux<String> send(String orderId) {
      return reactor.core.publisher.Flux.just(orderId);
    }
  }

  /** An event class without its own toString(): Object's gives each instance its own key. */
  public static final class PlainEvent {
    final String orderId;

    public PlainEvent(String orderId) {
      this.orderId = orderId;
    }
  }

  static class KeyFromObjectToString {
    final java.util.concurrent.atomic.AtomicInteger runs =
        new java.util.concurrent.atomic.AtomicInteger();

    @Idempotent(key = "#event")
    public String send(PlainEvent event) {
      return "sent-" + runs.incrementAndGet();
    }

    public int runs() {
      return runs.get();
    }
  }

  static class TtlNotLongerThanTheLease {
    @Idempotent(key = "#orderId", ttl = "30s")
    public String send(String orderId) {
      return orderId;
    }
  }

  static class BootTtls {
    @Idempotent(name = "iso", key = "#orderId", ttl = "PT72H")
    public String iso(String orderId) {
      return orderId;
    }

    @Idempotent(name = "simple", key = "#orderId", ttl = "72h")
    public String simple(String orderId) {
      return orderId;
    }
  }

  static class BadFingerprint {
    @Idempotent(key = "#orderId", fingerprint = "#order.")
    public String send(String orderId) {
      return orderId;
    }
  }

  static class FingerprintNamingNoParameter {
    @Idempotent(key = "#orderId", fingerprint = "#body")
    public String send(String orderId) {
      return orderId;
    }
  }

  static class TwoContexts {
    @Idempotent(key = "#orderId")
    public String send(
        String orderId, dev.idempotency.SendContext one, dev.idempotency.SendContext two) {
      return orderId;
    }
  }

  static class BadName {
    @Idempotent(name = "order shipped!", key = "#orderId")
    public String send(String orderId) {
      return orderId;
    }
  }

  /** Two classes named Sms in two "packages" (outer classes): the same default names. */
  static class Billing {
    static class Sms {
      @Idempotent(key = "#invoiceId")
      public String send(String invoiceId) {
        return "billing " + invoiceId;
      }
    }
  }

  static class Shipping {
    static class Sms {
      @Idempotent(key = "#orderId")
      public String send(String orderId) {
        return "shipping " + orderId;
      }
    }

    static class NamedSms {
      @Idempotent(name = "Sms.send", key = "#orderId")
      public String send(String orderId) {
        return "shipping " + orderId;
      }
    }
  }

  static class Overloads {
    @Idempotent(key = "#orderId")
    public String send(String orderId) {
      return orderId;
    }

    @Idempotent(key = "#orderId")
    public String send(String orderId, int parts) {
      return orderId + parts;
    }
  }

  static class UntypedStage {
    @Idempotent(key = "#orderId")
    @SuppressWarnings("rawtypes")
    public CompletableFuture send(String orderId) {
      return CompletableFuture.completedFuture(orderId);
    }
  }

  static class Fine {
    @Idempotent(key = "#orderId + ':' + #p0.length()")
    public String send(String orderId) {
      return orderId;
    }
  }

  private void failsWith(Class<?> bean, String... message) {
    runner
        .withBean(bean)
        .run(
            context -> {
              assertThat(context).hasFailed();
              assertThat(context.getStartupFailure())
                  .rootCause()
                  .hasMessageContaining("@Idempotent on " + bean.getName() + ".send(..)")
                  .hasMessageContainingAll(message);
            });
  }

  @Test
  void aKeyThatIsNotSpelFails() {
    failsWith(BadSyntax.class, "'#orderId +' is not a valid SpEL expression");
  }

  @Test
  void aKeyNamingNoParameterFailsAndListsTheParameters() {
    failsWith(
        MisspelledParameter.class, "#orderIdd is not a parameter", "the parameters are orderId");
  }

  @Test
  void anIndexPastTheParametersFails() {
    failsWith(IndexPastTheParameters.class, "#p1 is past the method's 1 parameters");
  }

  @Test
  void aMethodReturningFluxFailsWhileOneReturningMonoIsGuarded() {
    failsWith(
        ReturnsFlux.class,
        "returns reactor.core.publisher.Flux, which is not supported",
        "Return a Mono (of a List, to keep several elements)");
    runner.withBean(ReturnsMono.class).run(context -> assertThat(context).hasNotFailed());
  }

  @Test
  void aKeyReferringToABeanFailsAtStartupNotAtEveryCall() {
    failsWith(
        BeanReferenceKey.class,
        "@keys refers to a bean, and none can be reached",
        "T(com.example.Keys).of(#p0)");
  }

  /**
   * SpEL's own failure for the arguments (an index out of range) is bad input, the same at every
   * call: an {@link InvalidKeyException} (a listener's message with it is a poison message, not
   * retried); a getter the key reads that throws is the getter's own failure, as it was.
   */
  @Test
  void aKeyThatCannotBeEvaluatedForTheArgumentsIsAnInvalidKeyAndNothingRuns() {
    runner
        .withBean(KeyFromAPart.class)
        .run(
            context -> {
              KeyFromAPart bean = context.getBean(KeyFromAPart.class);
              org.assertj.core.api.Assertions.assertThatThrownBy(() -> bean.send("no-bar"))
                  .isInstanceOf(InvalidKeyException.class)
                  .hasMessageContaining("cannot be evaluated for these arguments")
                  .hasCauseInstanceOf(org.springframework.expression.EvaluationException.class);
              org.assertj.core.api.Assertions.assertThatThrownBy(
                      () -> bean.sendOrder(new Order("o-1", true)))
                  .isNotInstanceOf(InvalidKeyException.class)
                  .hasRootCauseMessage("the look-up timed out");
              assertThat(bean.runs()).isZero();
              assertThat(bean.send("a|o-2")).isEqualTo("sent-1");
              assertThat(bean.sendOrder(new Order("o-3", false))).isEqualTo("sent-2");
            });
  }

  @Test
  void aTtlThatIsNotADurationFails() {
    failsWith(BadTtl.class, "ttl 'a day' is not a duration such as PT72H or 72h");
  }

  @Test
  void aTtlNotLongerThanTheLeaseFailsAtStartupNotAtTheFirstCall() {
    failsWith(
        TtlNotLongerThanTheLease.class,
        "ttl '30s' must be longer than the lease (idempotency.lease = PT30S)");
  }

  @Test
  void aKeyFromObjectsToStringIsRefusedAtTheCallAndNothingRuns() {
    runner
        .withBean(KeyFromObjectToString.class)
        .run(
            context -> {
              KeyFromObjectToString bean = context.getBean(KeyFromObjectToString.class);
              org.assertj.core.api.Assertions.assertThatThrownBy(
                      () -> bean.send(new PlainEvent("o-1")))
                  .isInstanceOf(IllegalArgumentException.class)
                  .hasMessageContaining("toString");
              assertThat(bean.runs()).isZero();
            });
  }

  @Test
  void ttlsTakeBootsDurationFormats() {
    runner
        .withBean(BootTtls.class)
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              assertThat(context.getBean(BootTtls.class).simple("o-1")).isEqualTo("o-1");
            });
  }

  @Test
  void aFingerprintThatIsNotSpelFails() {
    failsWith(BadFingerprint.class, "the fingerprint '#order.' is not a valid SpEL expression");
  }

  @Test
  void aFingerprintNamingNoParameterFails() {
    failsWith(FingerprintNamingNoParameter.class, "#body is not a parameter");
  }

  @Test
  void twoSendContextParametersFail() {
    failsWith(TwoContexts.class, "declares more than one SendContext parameter");
  }

  @Test
  void aNameThatIsNotAnOperationNameFails() {
    failsWith(BadName.class, "the name 'order shipped!' must be 1 to 64 characters");
  }

  @Test
  void twoClassesWithOneSimpleNameFailTheStartNamingBothMethods() {
    runner
        .withBean(Billing.Sms.class)
        .withBean(Shipping.Sms.class)
        .run(
            context -> {
              assertThat(context).hasFailed();
              assertThat(context.getStartupFailure())
                  .rootCause()
                  .hasMessageContainingAll(
                      "have the same default name 'Sms.send'",
                      Billing.Sms.class.getName() + ".send(String)",
                      Shipping.Sms.class.getName() + ".send(String)",
                      "@Idempotent(name = ");
            });
  }

  @Test
  void twoOverloadsFailTheStartNamingBoth() {
    runner
        .withBean(Overloads.class)
        .run(
            context -> {
              assertThat(context).hasFailed();
              assertThat(context.getStartupFailure())
                  .rootCause()
                  .hasMessageContainingAll(
                      "have the same default name 'Overloads.send'",
                      Overloads.class.getName() + ".send(String)",
                      Overloads.class.getName() + ".send(String, int)");
            });
  }

  /** An application that puts its transactions first, outside everything. */
  @org.springframework.context.annotation.Configuration(proxyBeanMethods = false)
  @org.springframework.transaction.annotation.EnableTransactionManagement(order = 0)
  static class TransactionsFirst {
    @org.springframework.context.annotation.Bean
    org.springframework.transaction.PlatformTransactionManager transactionManager() {
      return new org.springframework.transaction.support.AbstractPlatformTransactionManager() {
        @Override
        protected Object doGetTransaction() {
          return new Object();
        }

        @Override
        protected void doBegin(
            Object transaction, org.springframework.transaction.TransactionDefinition definition) {}

        @Override
        protected void doCommit(
            org.springframework.transaction.support.DefaultTransactionStatus status) {}

        @Override
        protected void doRollback(
            org.springframework.transaction.support.DefaultTransactionStatus status) {}
      };
    }
  }

  @Test
  void transactionsOrderedOutsideTheGuardFailTheStart() {
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
                  .hasMessageContaining("@Transactional would run outside @Idempotent");
            });
  }

  @Test
  void transactionsInTheirDefaultOrderRunInsideTheGuard() {
    runner
        .withUserConfiguration(DefaultTransactions.class)
        .withBean(Fine.class)
        .run(context -> assertThat(context).hasNotFailed());
  }

  @org.springframework.context.annotation.Configuration(proxyBeanMethods = false)
  @org.springframework.transaction.annotation.EnableTransactionManagement
  static class DefaultTransactions {
    @org.springframework.context.annotation.Bean
    org.springframework.transaction.PlatformTransactionManager transactionManager() {
      return new TransactionsFirst().transactionManager();
    }
  }

  @Test
  void anExplicitNameIsAChoiceNotACollision() {
    runner
        .withBean(Billing.Sms.class)
        .withBean(Shipping.NamedSms.class)
        .run(context -> assertThat(context).hasNotFailed());
  }

  @Test
  void aStageOfAnUnknownTypeFails() {
    failsWith(UntypedStage.class, "returns a stage of an unknown type");
  }

  @Test
  void aGoodAnnotationStarts() {
    runner
        .withBean(Fine.class)
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              Fine fine = context.getBean(Fine.class);
              assertThat(org.springframework.aop.support.AopUtils.isAopProxy(fine)).isTrue();
              assertThat(fine.send("o-1")).isEqualTo("o-1");
            });
  }
}
