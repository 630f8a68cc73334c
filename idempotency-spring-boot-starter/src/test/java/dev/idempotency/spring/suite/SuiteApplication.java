package dev.idempotency.spring.suite;

import dev.idempotency.spring.Idempotent;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import dev.idempotency.spring.web.IdempotentEndpoint;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executor;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.context.annotation.Bean;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;

/**
 * The entry-point suite's application: one provider behind each of the starter's HTTP-reachable
 * entry points, on the real in-memory store that a test can make fail as a stopped server does.
 */
@SpringBootConfiguration(proxyBeanMethods = false)
@EnableAutoConfiguration
public class SuiteApplication {

  /** The store, unless a test registered one that outlives the application (a restart). */
  @Bean
  @ConditionalOnMissingBean
  SwitchableKeyStore switchableKeyStore() {
    return new SwitchableKeyStore();
  }

  /** The provider, unless a test registered one that outlives the application. */
  @Bean
  @ConditionalOnMissingBean
  Provider provider() {
    return new Provider();
  }

  @Bean
  Sender sender(Provider provider) {
    return new Sender(provider);
  }

  /** The stand-in provider: counts each send per key, and can hold sends until released. */
  public static final class Provider {
    private final Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();
    private final AtomicReference<CountDownLatch> hold = new AtomicReference<>();
    private final AtomicReference<CountDownLatch> entered = new AtomicReference<>();

    /** Sends for {@code key}: waits while held (at most a minute), then counts the send. */
    String send(String key) {
      CountDownLatch held = hold.get();
      CountDownLatch in = entered.get();
      if (in != null) {
        in.countDown();
      }
      if (held != null) {
        try {
          if (!held.await(60, TimeUnit.SECONDS)) {
            throw new IllegalStateException("the test never released the provider");
          }
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new IllegalStateException("the provider's send was interrupted", e);
        }
      }
      int n = sends.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
      return "sent-" + key + "-" + n;
    }

    /** Holds the sends that start from now on; returns a latch counted down when one starts. */
    CountDownLatch hold(CountDownLatch release) {
      return hold(release, 1);
    }

    /** Holds the sends that start from now on; the latch returned counts {@code sends} starting. */
    CountDownLatch hold(CountDownLatch release, int sends) {
      CountDownLatch in = new CountDownLatch(sends);
      entered.set(in);
      hold.set(release);
      return in;
    }

    /** Stops holding sends. */
    void stopHolding() {
      hold.set(null);
      entered.set(null);
    }

    /** How often the provider sent for {@code key}. */
    int sends(String key) {
      AtomicInteger count = sends.get(key);
      return count == null ? 0 : count.get();
    }
  }

  /** {@code @Idempotent} methods, blocking and async, keyed by the caller's key. */
  public static class Sender {
    private static final Executor ASYNC = Executors.newCachedThreadPool();
    private final Provider provider;

    Sender(Provider provider) {
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
   * The entry points over HTTP: two endpoints and two handlers calling guarded methods (a member
   * class of the configuration, registered with it).
   */
  @RestController
  public static class SuiteController {
    private static final Executor ASYNC = Executors.newCachedThreadPool();
    private final Provider provider;
    private final Sender sender;

    SuiteController(Provider provider, Sender sender) {
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
