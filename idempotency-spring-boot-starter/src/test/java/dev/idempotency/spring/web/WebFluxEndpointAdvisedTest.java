package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.autoconfigure.IdempotencyAutoConfiguration;
import dev.idempotency.spring.autoconfigure.IdempotencyWebFluxAutoConfiguration;
import dev.idempotency.spring.autoconfigure.JacksonAutoConfigurations;
import java.util.Arrays;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.springframework.aop.framework.Advised;
import org.springframework.aop.support.AopUtils;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ReactiveWebApplicationContextRunner;
import org.springframework.core.NestedExceptionUtils;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;
import reactor.core.publisher.Mono;

/**
 * A WebFlux {@link IdempotentEndpoint} is stored only if its handler method is seen invoked ({@link
 * IdempotentEndpointInvocations}): a method that Spring AOP cannot advise fails the start, naming
 * it, instead of never storing a response (every repeat would send again).
 */
class WebFluxEndpointAdvisedTest {

  final ReactiveWebApplicationContextRunner runner =
      new ReactiveWebApplicationContextRunner()
          .withConfiguration(
              AutoConfigurations.of(
                  JacksonAutoConfigurations.jackson(),
                  webFlux(),
                  IdempotencyAutoConfiguration.class,
                  IdempotencyWebFluxAutoConfiguration.class))
          .withPropertyValues("idempotency.store=memory");

  static Class<?> webFlux() {
    for (String name :
        new String[] {
          "org.springframework.boot.webflux.autoconfigure.WebFluxAutoConfiguration",
          "org.springframework.boot.autoconfigure.web.reactive.WebFluxAutoConfiguration"
        }) {
      try {
        return Class.forName(name);
      } catch (ClassNotFoundException notOnThisLine) {
        // try the other
      }
    }
    throw new IllegalStateException("no Spring WebFlux auto-configuration on the classpath");
  }

  @RestController
  static class FinalHandler {
    @PostMapping("/send")
    @IdempotentEndpoint
    public final Mono<Map<String, Object>> send() {
      return Mono.just(Map.of());
    }
  }

  @RestController
  static class GoodHandler {
    @PostMapping("/send")
    @IdempotentEndpoint
    public Mono<Map<String, Object>> send() {
      return Mono.just(Map.of());
    }
  }

  @Test
  void aFinalHandlerMethodFailsSinceItsInvocationCannotBeSeen() {
    runner
        .withBean(FinalHandler.class)
        .run(
            context -> {
              assertThat(context).hasFailed();
              assertThat(NestedExceptionUtils.getMostSpecificCause(context.getStartupFailure()))
                  .hasMessageContaining(FinalHandler.class.getName() + ".send(")
                  .hasMessageContaining("the method is final");
            });
  }

  @Test
  void aGoodEndpointReturningAMonoStartsAdvisedByTheInvocationsAdvisor() {
    runner
        .withBean(GoodHandler.class)
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              Object controller = context.getBean(GoodHandler.class);
              assertThat(AopUtils.isAopProxy(controller)).isTrue();
              assertThat(((Advised) controller).getAdvisors())
                  .anyMatch(IdempotentEndpointInvocations.class::isInstance);
              assertThat(
                      Arrays.stream(((Advised) controller).getAdvisors())
                          .filter(IdempotentEndpointInvocations.class::isInstance)
                          .count())
                  .isEqualTo(1);
            });
  }
}
