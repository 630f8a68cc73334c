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

  static class BadTtl {
    @Idempotent(key = "#orderId", ttl = "24h")
    public String send(String orderId) {
      return orderId;
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
  void aTtlThatIsNotIso8601Fails() {
    failsWith(BadTtl.class, "ttl '24h' is not an ISO-8601 duration");
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
