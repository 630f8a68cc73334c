package dev.idempotency.spring.web;

import dev.idempotency.spring.Idempotent;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import dev.idempotency.spring.reactive.NettyServer;
import dev.idempotency.spring.web.ThrottledRegionProbes.Region;
import java.time.ZoneId;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;
import reactor.core.publisher.Mono;

/**
 * probeW, of fixproxy 7e9c3d17 ({@code ExpressionAttributes}), Boot 3.5 and 4.0, real HTTP through
 * a real Boot application (Spring WebFlux on Netty): an {@code @Idempotent} method returning a
 * {@code Mono} whose key converts the application's {@link Region} to a {@link ZoneId} (the
 * conversion service calls its {@code toZoneId()}), the region an interface-based (JDK) proxy
 * guarded by spring-aop's own {@code ConcurrencyThrottleInterceptor}. The first call finds the
 * throttle closed (limit 0: Spring's {@code IllegalStateException} before the application's look-up
 * runs, only Spring's and the JDK's frames above the conversion's, the proxy's among them); then it
 * is open. The refusal is the called code's failure: a 5xx that the client retries, and the retry
 * sends once, never the final 400 of an invalid key (a lost send in SPEC 1's terms). {@code
 * ThrottledKeyConversionEndpointProbeTest}'s case on WebFlux.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class WebFluxThrottledKeyConversionProbeTest {

  private ConfigurableApplicationContext app;

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import({NettyServer.class, Notifier.class, Controller.class})
  static class App {
    @Bean
    SwitchableKeyStore switchableKeyStore() {
      return new SwitchableKeyStore();
    }

    @Bean
    Region probeWThrottledRegion() {
      return ThrottledRegionProbes.throttledRegion();
    }
  }

  /** The notifier: each Mono that runs is a send. The bean is a proxy: state through methods. */
  static class Notifier {
    private final Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();

    @Idempotent(key = ThrottledRegionProbes.KEY)
    public Mono<String> send(String event) {
      return Mono.fromSupplier(
          () -> "sent-" + sends.computeIfAbsent(event, e -> new AtomicInteger()).incrementAndGet());
    }

    public int sends(String event) {
      AtomicInteger count = sends.get(event);
      return count == null ? 0 : count.get();
    }
  }

  @RestController
  static class Controller {
    private final Notifier notifier;

    Controller(Notifier notifier) {
      this.notifier = notifier;
    }

    @PostMapping("/notify/{event}")
    Mono<String> send(@PathVariable String event) {
      return notifier.send(event);
    }
  }

  @BeforeAll
  void start() {
    app =
        new SpringApplicationBuilder(App.class)
            .properties(
                "server.port=0",
                "spring.main.web-application-type=reactive",
                "spring.main.banner-mode=off")
            .run();
    ThrottledRegionProbes.useRegionOf(app);
  }

  @AfterAll
  void stop() {
    if (app != null) {
      app.close();
    }
  }

  @Test
  void aLookUpRefusedOnceBySpringsThrottleBeyondAProxyIsA5xxAndTheRetrySends() throws Exception {
    Notifier notifier = app.getBean(Notifier.class);
    ThrottledRegionProbes.assertRefusedOnceThenSentOnce(app, notifier::sends);
  }
}
