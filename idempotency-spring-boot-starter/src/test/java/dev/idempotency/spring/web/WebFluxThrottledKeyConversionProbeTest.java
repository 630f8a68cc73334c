package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.BoundedExchange;
import dev.idempotency.spring.Idempotent;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import dev.idempotency.spring.reactive.NettyServer;
import java.lang.reflect.Proxy;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.time.ZoneId;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.springframework.aop.framework.ProxyFactory;
import org.springframework.aop.interceptor.ConcurrencyThrottleInterceptor;
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

  static final HttpClient HTTP =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

  /** The throttle of the region's proxy. */
  static final ConcurrencyThrottleInterceptor THROTTLE = new ConcurrencyThrottleInterceptor();

  private ConfigurableApplicationContext app;

  /** A region of the application's, whose zone is looked up (a remote directory). */
  public interface Region {
    /**
     * The region's zone, which the conversion service calls to convert a Region to a ZoneId.
     *
     * @return the zone
     */
    ZoneId toZoneId();
  }

  /** The directory's client. */
  public static class RegionDirectory implements Region {
    @Override
    public ZoneId toZoneId() {
      return ZoneId.of("Europe/Paris");
    }
  }

  /** The key's parts. */
  public static final class Keys {
    static volatile Region region;

    private Keys() {}

    /**
     * The region bean (the proxy).
     *
     * @param event the event
     * @return the region
     */
    public static Region region(String event) {
      return region;
    }

    /**
     * The key of a notice in a zone.
     *
     * @param zone the zone, converted from the Region with its toZoneId()
     * @param event the event
     * @return the key
     */
    public static String ofZone(ZoneId zone, String event) {
      return "zone-" + zone.getId() + "-" + event;
    }
  }

  static final String KEYS =
      "T(dev.idempotency.spring.web.WebFluxThrottledKeyConversionProbeTest$Keys)";

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
      ProxyFactory proxies = new ProxyFactory(new RegionDirectory());
      proxies.addInterface(Region.class);
      proxies.addAdvice(THROTTLE);
      return (Region) proxies.getProxy();
    }
  }

  /** The notifier: each Mono that runs is a send. The bean is a proxy: state through methods. */
  static class Notifier {
    private final Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();

    @Idempotent(key = KEYS + ".ofZone(" + KEYS + ".region(#event), #event)")
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
    Keys.region = app.getBean(Region.class);
  }

  @AfterAll
  void stop() {
    if (app != null) {
      app.close();
    }
  }

  @Test
  void aLookUpRefusedOnceBySpringsThrottleBeyondAProxyIsA5xxAndTheRetrySends() throws Exception {
    assertThat(Proxy.isProxyClass(Keys.region.getClass()))
        .as("the region is a JDK proxy: " + Keys.region.getClass())
        .isTrue();
    String event = "region-" + UUID.randomUUID().toString().substring(0, 8);
    HttpResponse<String> first;
    THROTTLE.setConcurrencyLimit(0);
    try {
      first = post(event);
    } finally {
      THROTTLE.setConcurrencyLimit(-1);
    }
    HttpResponse<String> retry = post(event);

    assertThat(first.statusCode())
        .as("the first call, its look-up refused by the throttle: " + first.body())
        .isEqualTo(500);
    assertThat(retry.statusCode()).as("the client's retry: " + retry.body()).isEqualTo(200);
    assertThat(app.getBean(Notifier.class).sends(event)).as("sends").isEqualTo(1);
  }

  private HttpResponse<String> post(String event) throws Exception {
    int port = app.getEnvironment().getProperty("local.server.port", Integer.class);
    HttpRequest request =
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/notify/" + event))
            .timeout(Duration.ofSeconds(60))
            .POST(HttpRequest.BodyPublishers.noBody())
            .build();
    return BoundedExchange.send(HTTP, request, HttpResponse.BodyHandlers.ofString());
  }
}
