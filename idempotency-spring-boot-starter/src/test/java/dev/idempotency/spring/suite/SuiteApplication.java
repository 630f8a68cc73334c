package dev.idempotency.spring.suite;

import dev.idempotency.spring.Idempotent;
import dev.idempotency.spring.web.IdempotentEndpoint;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.Executors;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;

/**
 * The entry-point suite's Spring MVC application (on Tomcat): one {@link SuiteProvider} behind each
 * of the starter's servlet entry points, on the real in-memory store that a test can make fail as a
 * stopped server does. {@link Stack#MVC} starts it.
 */
@SpringBootConfiguration(proxyBeanMethods = false)
@EnableAutoConfiguration
@Import(SuiteBeans.class)
public class SuiteApplication {

  @Bean
  Sender sender(SuiteProvider provider) {
    return new Sender(provider);
  }

  /** {@code @Idempotent} methods, blocking and async, keyed by the caller's key. */
  public static class Sender {
    private static final Executor ASYNC = Executors.newCachedThreadPool();
    private final SuiteProvider provider;

    Sender(SuiteProvider provider) {
      this.provider = provider;
    }

    @Idempotent(name = "suite-method", key = "#key")
    public String send(String key) {
      return provider.send(key);
    }

    @Idempotent(name = "suite-method-async", key = "#key")
    public CompletableFuture<String> sendAsync(String key) {
      return CompletableFuture.supplyAsync(() -> provider.send(key), ASYNC);
    }
  }

  /**
   * The entry points over HTTP: two endpoints, and two handlers calling guarded methods whose
   * refusals {@code IdempotencyExceptionHandler} answers (a member class of the configuration,
   * registered with it).
   */
  @RestController
  public static class SuiteController {
    private static final Executor ASYNC = Executors.newCachedThreadPool();
    private final SuiteProvider provider;
    private final Sender sender;

    SuiteController(SuiteProvider provider, Sender sender) {
      this.provider = provider;
      this.sender = sender;
    }

    @PostMapping("/suite/endpoint")
    @IdempotentEndpoint
    public Map<String, String> endpoint(@RequestHeader("Idempotency-Key") String key) {
      return Map.of("sent", provider.send(key));
    }

    @PostMapping("/suite/endpoint-async")
    @IdempotentEndpoint
    public CompletableFuture<Map<String, String>> endpointAsync(
        @RequestHeader("Idempotency-Key") String key) {
      return CompletableFuture.supplyAsync(() -> Map.of("sent", provider.send(key)), ASYNC);
    }

    @PostMapping("/suite/method")
    public Map<String, String> method(@RequestHeader("Idempotency-Key") String key) {
      return Map.of("sent", sender.send(key));
    }

    @PostMapping("/suite/method-async")
    public CompletableFuture<Map<String, String>> methodAsync(
        @RequestHeader("Idempotency-Key") String key) {
      return sender.sendAsync(key).thenApply(sent -> Map.of("sent", sent));
    }
  }
}
