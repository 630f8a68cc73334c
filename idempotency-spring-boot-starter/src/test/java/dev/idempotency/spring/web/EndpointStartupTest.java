package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.SendContext;
import dev.idempotency.spring.autoconfigure.IdempotencyAutoConfiguration;
import dev.idempotency.spring.autoconfigure.IdempotencyWebMvcAutoConfiguration;
import dev.idempotency.spring.autoconfigure.JacksonAutoConfigurations;
import dev.idempotency.spring.autoconfigure.WebMvcAutoConfigurations;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.WebApplicationContextRunner;
import org.springframework.core.NestedExceptionUtils;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;

/**
 * Mistakes in an {@link IdempotentEndpoint} application that can be seen at startup fail the start,
 * naming the handler and the mistake, instead of failing (or silently not guarding) a request.
 */
class EndpointStartupTest {

  final WebApplicationContextRunner runner =
      new WebApplicationContextRunner()
          .withConfiguration(
              AutoConfigurations.of(
                  JacksonAutoConfigurations.jackson(),
                  WebMvcAutoConfigurations.webMvc(),
                  IdempotencyAutoConfiguration.class,
                  IdempotencyWebMvcAutoConfiguration.class))
          .withPropertyValues("idempotency.store=memory");

  @RestController
  static class ContextWithoutTheAnnotation {
    @PostMapping("/send")
    public Map<String, Object> send(SendContext context) {
      return Map.of("key", context.providerKey());
    }
  }

  @RestController
  static class FinalHandler {
    @PostMapping("/send")
    @IdempotentEndpoint
    public final Map<String, Object> send() {
      return Map.of();
    }
  }

  @RestController
  static class CookieReplayed {
    @PostMapping("/send")
    @IdempotentEndpoint(headers = "Set-Cookie")
    public Map<String, Object> send() {
      return Map.of();
    }
  }

  @RestController
  static class TtlNotLongerThanTheLease {
    @PostMapping("/send")
    @IdempotentEndpoint(ttl = "20s")
    public Map<String, Object> send() {
      return Map.of();
    }
  }

  @RestController
  static class TtlNotADuration {
    @PostMapping("/send")
    @IdempotentEndpoint(ttl = "tomorrow")
    public Map<String, Object> send() {
      return Map.of();
    }
  }

  @RestController
  static class BadName {
    @PostMapping("/send")
    @IdempotentEndpoint(name = "send sms")
    public Map<String, Object> send() {
      return Map.of();
    }
  }

  @RestController
  static class MonoHandler {
    @PostMapping("/send")
    @IdempotentEndpoint
    public reactor.core.publisher.Mono<Map<String, Object>> send() {
      return reactor.core.publisher.Mono.just(Map.of());
    }
  }

  static class OwnDeferredResult<T>
      extends org.springframework.web.context.request.async.DeferredResult<T> {}

  @RestController
  static class DeferredResultSubclassHandler {
    @PostMapping("/send")
    @IdempotentEndpoint
    public OwnDeferredResult<Map<String, Object>> send() {
      return new OwnDeferredResult<>();
    }
  }

  static class OwnFuture<T> extends java.util.concurrent.CompletableFuture<T> {}

  @RestController
  static class CompletableFutureSubclassHandler {
    @PostMapping("/send")
    @IdempotentEndpoint
    public OwnFuture<Map<String, Object>> send() {
      return new OwnFuture<>();
    }
  }

  @RestController
  static class EntityOfMonoHandler {
    @PostMapping("/send")
    @IdempotentEndpoint
    public org.springframework.http.ResponseEntity<reactor.core.publisher.Mono<String>> send() {
      return org.springframework.http.ResponseEntity.ok(reactor.core.publisher.Mono.just("sent"));
    }
  }

  interface SendTask extends java.util.concurrent.Callable<Map<String, Object>> {}

  @RestController
  static class CallableSubtypeHandler {
    @PostMapping("/send")
    @IdempotentEndpoint
    public SendTask send() {
      return Map::of;
    }
  }

  @RestController
  static class Fine {
    @PostMapping("/send")
    @IdempotentEndpoint(name = "sms-send", ttl = "72h", headers = "X-Notification-Id")
    public Map<String, Object> send(SendContext context) {
      return Map.of("key", context.providerKey());
    }
  }

  private void failsWith(Class<?> controller, String... message) {
    runner
        .withBean(controller)
        .run(
            context -> {
              assertThat(context).hasFailed();
              assertThat(NestedExceptionUtils.getMostSpecificCause(context.getStartupFailure()))
                  .hasMessageContaining(controller.getName() + ".send(")
                  .hasMessageContainingAll(message);
            });
  }

  @Test
  void aSendContextParameterOnAHandlerThatIsNotGuardedFails() {
    failsWith(ContextWithoutTheAnnotation.class, "takes a SendContext, which only");
  }

  @Test
  void aFinalHandlerMethodFailsSinceItsStartCannotBeSeen() {
    failsWith(FinalHandler.class, "the method is final");
  }

  @Test
  void setCookieAmongTheReplayedHeadersFails() {
    failsWith(CookieReplayed.class, "never Set-Cookie");
  }

  @Test
  void aTtlNotLongerThanTheLeaseFails() {
    failsWith(TtlNotLongerThanTheLease.class, "must be longer than the lease");
  }

  @Test
  void aTtlThatIsNotADurationFails() {
    failsWith(TtlNotADuration.class, "ttl 'tomorrow' is not a duration");
  }

  @Test
  void aNameThatIsNotAnOperationNameFails() {
    failsWith(BadName.class, "the name 'send sms' must be 1 to 64 characters");
  }

  /** From the adversarial probe: a timeout released the key while the send ran (2 sends). */
  @Test
  void aSpringMvcEndpointReturningAMonoFails() {
    failsWith(MonoHandler.class, "reactor.core.publisher.Mono", "does not support", "toFuture()");
  }

  @Test
  void aSpringMvcEndpointReturningADeferredResultSubclassFails() {
    failsWith(DeferredResultSubclassHandler.class, "a subclass of DeferredResult");
  }

  /**
   * Found by the probe37c re-probe: such a handler started, and at a container timeout its key was
   * released while its send ran (two provider sends for one key).
   */
  @Test
  void aSpringMvcEndpointReturningACompletableFutureSubclassFails() {
    failsWith(CompletableFutureSubclassHandler.class, "OwnFuture", "a subtype of CompletionStage");
  }

  /** Found by the probe37c re-probe: as a plain {@code Mono}, released at a container timeout. */
  @Test
  void aSpringMvcEndpointReturningAResponseEntityOfAMonoFails() {
    failsWith(EntityOfMonoHandler.class, "ResponseEntity of reactor.core.publisher.Mono");
  }

  @Test
  void aSpringMvcEndpointDeclaredToReturnASubtypeOfCallableFails() {
    failsWith(CallableSubtypeHandler.class, "a subtype of Callable");
  }

  @Test
  void aGoodEndpointStartsAdvised() {
    runner
        .withBean(Fine.class)
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              assertThat(
                      org.springframework.aop.support.AopUtils.isAopProxy(
                          context.getBean(Fine.class)))
                  .isTrue();
            });
  }
}
