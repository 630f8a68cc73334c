package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.idempotency.SendContext;
import dev.idempotency.spring.autoconfigure.WebFluxAutoConfigurations;
import dev.idempotency.spring.reactive.NettyServer;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.WebApplicationType;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.core.NestedExceptionUtils;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;
import reactor.core.publisher.Mono;

/**
 * The start-time checks of {@link IdempotentEndpoint} on Spring WebFlux: a real reactive
 * application on Reactor Netty with a mistaken handler fails to start, naming the handler and the
 * mistake, instead of failing (or silently not guarding) its first request. The Spring MVC twin is
 * {@link EndpointStartupTest}.
 */
class WebFluxEndpointStartupTest {

  /**
   * The application: the starter's and WebFlux's auto-configuration, Reactor Netty, no component
   * scan.
   */
  @Configuration(proxyBeanMethods = false)
  @Import({NettyServer.class, WebFluxAutoConfigurations.class})
  static class ReactiveApplication {}

  @RestController
  static class ContextWithoutTheAnnotation {
    @PostMapping("/send")
    public Mono<Map<String, Object>> send(SendContext context) {
      return Mono.just(Map.of("key", context.providerKey()));
    }
  }

  @RestController
  static class CookieReplayed {
    @PostMapping("/send")
    @IdempotentEndpoint(headers = "Set-Cookie")
    public Mono<Map<String, Object>> send() {
      return Mono.just(Map.of());
    }
  }

  @RestController
  static class TtlNotLongerThanTheLease {
    @PostMapping("/send")
    @IdempotentEndpoint(ttl = "20s")
    public Mono<Map<String, Object>> send() {
      return Mono.just(Map.of());
    }
  }

  @RestController
  static class TtlNotADuration {
    @PostMapping("/send")
    @IdempotentEndpoint(ttl = "tomorrow")
    public Mono<Map<String, Object>> send() {
      return Mono.just(Map.of());
    }
  }

  @RestController
  static class BadName {
    @PostMapping("/send")
    @IdempotentEndpoint(name = "send sms")
    public Mono<Map<String, Object>> send() {
      return Mono.just(Map.of());
    }
  }

  /** Reactive types are WebFlux's own idiom: they must not fail the start. */
  @RestController
  static class Fine {
    @PostMapping("/send")
    @IdempotentEndpoint(name = "sms-send", ttl = "72h", headers = "X-Notification-Id")
    public Mono<Map<String, Object>> send(SendContext context) {
      return Mono.just(Map.of("key", context.providerKey()));
    }
  }

  private static SpringApplication application(Class<?> controller) {
    SpringApplication application = new SpringApplication(ReactiveApplication.class, controller);
    application.setWebApplicationType(WebApplicationType.REACTIVE);
    application.setDefaultProperties(
        Map.of(
            "server.port", "0",
            "server.address", "127.0.0.1",
            "idempotency.store", "memory",
            "spring.main.banner-mode", "off",
            "spring.jmx.enabled", "false"));
    return application;
  }

  private static void failsWith(Class<?> controller, String... message) {
    Throwable failure = catchThrowable(() -> application(controller).run().close());

    assertThat(failure).as("the start of an application with %s", controller).isNotNull();
    assertThat(NestedExceptionUtils.getMostSpecificCause(failure))
        .hasMessageContaining("@IdempotentEndpoint")
        .hasMessageContaining(controller.getName() + ".send(")
        .hasMessageContainingAll(message);
  }

  @Test
  void aSendContextParameterOnAHandlerThatIsNotGuardedFails() {
    failsWith(ContextWithoutTheAnnotation.class, "takes a SendContext, which only");
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

  @Test
  void aGoodReactiveEndpointStartsOnNetty() {
    try (ConfigurableApplicationContext context = application(Fine.class).run()) {
      assertThat(context.getBeansOfType(IdempotentEndpointWebFilter.class)).hasSize(1);
      assertThat(context.getEnvironment().getProperty("local.server.port", Integer.class))
          .isPositive();
    }
  }
}
