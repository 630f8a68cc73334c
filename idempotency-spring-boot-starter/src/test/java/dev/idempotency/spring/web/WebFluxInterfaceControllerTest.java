package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.BoundedExchange;
import dev.idempotency.spring.autoconfigure.WebFluxAutoConfigurations;
import dev.idempotency.spring.reactive.NettyServer;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.springframework.aop.support.AopUtils;
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
 * Issue 39, SPEC 1 and 13 (an adversarial probe found the second case started silently and sent on
 * every repeat): a WebFlux controller whose mappings are declared on an interface, proxied through
 * that interface (a JDK proxy: Spring's infrastructure auto-proxy creator without class proxying,
 * as the starter registers it and as {@code spring.aop.proxy-target-class=false} gives). Either the
 * endpoint is guarded (a repeat is replayed, the handler runs once) or the start fails naming the
 * method; never a silent start where every repeat sends again.
 */
class WebFluxInterfaceControllerTest {

  private static final HttpClient CLIENT =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

  @Configuration(proxyBeanMethods = false)
  @Import({NettyServer.class, WebFluxAutoConfigurations.class})
  static class ProbeApplication {}

  /** The mapping and the annotation on the interface. */
  @RestController
  public interface AnnotatedApi {
    @PostMapping("/api/annotated")
    @IdempotentEndpoint
    Mono<Map<String, Object>> send();
  }

  public static class AnnotatedApiController implements AnnotatedApi {
    static final AtomicInteger RUNS = new AtomicInteger();

    @Override
    public Mono<Map<String, Object>> send() {
      return Mono.fromSupplier(() -> Map.of("n", RUNS.incrementAndGet()));
    }
  }

  /** The mapping on the interface, the annotation on the implementation. */
  @RestController
  public interface PlainApi {
    @PostMapping("/api/plain")
    Mono<Map<String, Object>> send();
  }

  public static class PlainApiController implements PlainApi {
    static final AtomicInteger RUNS = new AtomicInteger();

    @Override
    @IdempotentEndpoint
    public Mono<Map<String, Object>> send() {
      return Mono.fromSupplier(() -> Map.of("n", RUNS.incrementAndGet()));
    }
  }

  private static HttpResponse<String> post(int port, String path, String key) throws Exception {
    return BoundedExchange.send(
        CLIENT,
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
            .timeout(Duration.ofSeconds(30))
            .header("Idempotency-Key", key)
            .POST(HttpRequest.BodyPublishers.noBody())
            .build(),
        HttpResponse.BodyHandlers.ofString());
  }

  /** Starts the application, sends twice under one key; null if the start failed clearly. */
  private static String guardedOrRefused(Class<?> controller, String path, AtomicInteger runs)
      throws Exception {
    SpringApplication builder = new SpringApplication(ProbeApplication.class, controller);
    builder.setWebApplicationType(WebApplicationType.REACTIVE);
    builder.setDefaultProperties(
        Map.of(
            "server.port", "0",
            "server.address", "127.0.0.1",
            "idempotency.store", "memory",
            "idempotency.in-flight-wait", "100ms",
            "spring.main.banner-mode", "off",
            "spring.jmx.enabled", "false"));
    ConfigurableApplicationContext application;
    try {
      application = builder.run();
    } catch (RuntimeException refused) {
      assertThat(NestedExceptionUtils.getMostSpecificCause(refused)).hasMessageContaining(".send(");
      return "refused at start: " + NestedExceptionUtils.getMostSpecificCause(refused).getMessage();
    }
    try {
      int port =
          application.getEnvironment().getRequiredProperty("local.server.port", Integer.class);
      Object bean = application.getBean(controller.getInterfaces()[0]);
      String key = UUID.randomUUID().toString();
      int before = runs.get();
      HttpResponse<String> first = post(port, path, key);
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      HttpResponse<String> repeat = post(port, path, key);
      while (repeat.statusCode() == 409 && System.nanoTime() < deadline) {
        Thread.sleep(20);
        repeat = post(port, path, key);
      }
      assertThat(first.statusCode()).isEqualTo(200);
      assertThat(runs.get() - before)
          .as(
              "the handler runs once under one key (JDK proxy: %s; repeat %s %s %s)",
              AopUtils.isJdkDynamicProxy(bean),
              repeat.statusCode(),
              repeat.headers().map(),
              repeat.body())
          .isEqualTo(1);
      return "guarded";
    } finally {
      application.close();
    }
  }

  @Test
  void anEndpointAnnotatedOnTheInterfaceIsGuardedOrRefusedAtStart() throws Exception {
    System.out.println(
        guardedOrRefused(
            AnnotatedApiController.class, "/api/annotated", AnnotatedApiController.RUNS));
  }

  @Test
  void anEndpointAnnotatedOnTheImplementationIsGuardedOrRefusedAtStart() throws Exception {
    System.out.println(
        guardedOrRefused(PlainApiController.class, "/api/plain", PlainApiController.RUNS));
  }
}
