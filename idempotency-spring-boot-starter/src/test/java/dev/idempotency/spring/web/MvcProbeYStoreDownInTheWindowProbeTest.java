package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.testservers.Poll;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.context.request.async.DeferredResult;

/**
 * probeY, of fixown: the store down during the window of {@link
 * MvcProbeYStageAtTheDecisionProbeTest} (the moment the starter decided a timed-out call detached,
 * before Spring MVC's timeout handling): the store goes down there, the work sends (its outcome
 * cannot be written), a concurrent retry with the same key is sent from the window, and the store
 * comes back 2 s after the send. Expected (SPEC 1): one send, never lost: the retries while the
 * store is down get 503 (or 409), and once it is back the retry gets the send's answer replayed.
 * The application's own {@code KeyStore} (in memory, switched down as a stopped server would be:
 * {@link StoreDownEndpointTest.SwitchableStore}); {@code spring.mvc.async.request-timeout=1s}; real
 * HTTP.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class MvcProbeYStoreDownInTheWindowProbeTest implements EndpointClient {

  private static final String BASE = "/probeY/store-down/";

  private ConfigurableApplicationContext application;
  private int port;

  /** One application for the class, on its own store only (no store properties). */
  @BeforeAll
  void startApplication() {
    application =
        new SpringApplicationBuilder(DownApplication.class)
            .properties(
                "server.port=0",
                "server.shutdown=graceful",
                "spring.main.banner-mode=off",
                "spring.mvc.async.request-timeout=1s",
                "idempotency.close-grace-period=10s",
                "logging.level.dev.idempotency.spring.web.AsyncTimeouts=DEBUG")
            .run();
    port = MvcProbes.portOf(application);
  }

  @AfterAll
  void stopApplication() {
    if (application != null) {
      application.close();
    }
  }

  @Override
  public int port() {
    return port;
  }

  @Override
  public int runs() {
    return Sends.entered.get();
  }

  /**
   * A {@code Callable} still running at the timeout, the handler's own {@code DeferredResult} set
   * to a {@code Callable} or to its value, and the handler's own {@code CompletableFuture}'s value,
   * each completed in the window with the store down. Holds (probeY, at 0c7d68c7): every row on
   * Boot 3.5 and 4.0, one run per line.
   */
  @ParameterizedTest
  @Tag("extended") // 7 to 20 s a row: docs/guarantees.md
  @ValueSource(strings = {"callable", "deferred-callable", "deferred-value", "future-value"})
  void aSendInTheWindowWhileTheStoreIsDownIsNotLost(String shape) throws Exception {
    String seen = raced(shape);
    assertThat(seen).as("sends: " + seen).contains("sends: 1,");
  }

  private String raced(String shape) throws Exception {
    MvcProbeYStageAtTheDecisionProbeTest.AtTheDecision.attach();
    StoreDownEndpointTest.SwitchableStore store = DownApplication.store;
    String path = BASE + shape;
    String key = EndpointClient.newKey();
    CountDownLatch gate = new CountDownLatch(1);
    Sends.gates.put(key, gate);
    AtomicReference<String> inTheWindow = new AtomicReference<>("the hook did not run");
    MvcProbeYStageAtTheDecisionProbeTest.AtTheDecision.armed.set(
        () -> {
          store.down.set(true);
          gate.countDown(); // the work sends now
          boolean sent = waitFor(() -> Sends.done.containsKey(key), Duration.ofSeconds(10));
          String retry;
          try {
            retry = MvcProbes.replayed(post(path, key, "{}"));
          } catch (Exception e) {
            retry = "failed: " + e;
          }
          inTheWindow.set((sent ? "sent" : "no send in 10 s") + ", concurrent retry " + retry);
        });
    HttpResponse<byte[]> first;
    try {
      first = post(path, key, "{}");
    } finally {
      MvcProbeYStageAtTheDecisionProbeTest.AtTheDecision.armed.set(null);
      gate.countDown();
    }
    Poll.within(Duration.ofSeconds(20)).until("the send of " + key, () -> Sends.sends(key) >= 1);
    HttpResponse<byte[]> whileDown = post(path, key, "{}");
    Thread.sleep(2_000); // the outage lasts 2 s after the send: its length, not a wait for speed
    store.down.set(false);
    HttpResponse<byte[]> last = MvcProbes.retryUntilAnswered(this, path, key);
    waitFor(() -> Sends.sends(key) > 1, Duration.ofSeconds(3));
    String seen =
        shape
            + ": first answer "
            + MvcProbes.replayed(first)
            + ", the window: "
            + inTheWindow.get()
            + ", while down "
            + MvcProbes.replayed(whileDown)
            + ", last "
            + MvcProbes.replayed(last)
            + ", sends: "
            + Sends.sends(key)
            + ",";
    assertThat(inTheWindow.get()).as(seen).startsWith("sent");
    assertThat(inTheWindow.get()).as(seen).containsPattern("concurrent retry (409|503) ");
    assertThat(whileDown.statusCode()).as(seen).isIn(409, 503);
    assertThat(last.statusCode()).as("the retry: " + seen).isEqualTo(201);
    assertThat(EndpointClient.text(last)).as("the retry: " + seen).isEqualTo("sent-" + key);
    return seen;
  }

  private static boolean waitFor(java.util.function.BooleanSupplier condition, Duration within) {
    long deadline = System.nanoTime() + within.toNanos();
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        return false;
      }
      try {
        Thread.sleep(5);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return false;
      }
    }
    return true;
  }

  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(Sends.class)
  static class DownApplication {
    static volatile StoreDownEndpointTest.SwitchableStore store;

    @Bean
    StoreDownEndpointTest.SwitchableStore switchableStore() {
      StoreDownEndpointTest.SwitchableStore own = new StoreDownEndpointTest.SwitchableStore();
      store = own;
      return own;
    }
  }

  /** Endpoints whose send waits for the key's gate; each send counted, and marked done. */
  @RestController
  static class Sends {
    static final AtomicInteger entered = new AtomicInteger();
    static final Map<String, CountDownLatch> gates = new ConcurrentHashMap<>();
    static final Map<String, AtomicInteger> sent = new ConcurrentHashMap<>();
    static final Map<String, Boolean> done = new ConcurrentHashMap<>();
    private static final ExecutorService APPLICATION = Executors.newCachedThreadPool();

    static int sends(String key) {
      AtomicInteger count = sent.get(key);
      return count == null ? 0 : count.get();
    }

    static ResponseEntity<String> send(String key) {
      sent.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
      done.put(key, true);
      return ResponseEntity.status(201).body("sent-" + key);
    }

    private static void awaitGate(String key) {
      CountDownLatch gate = gates.getOrDefault(key, new CountDownLatch(0));
      try {
        gate.await(30, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }

    @PostMapping(BASE + "callable")
    @IdempotentEndpoint
    public Callable<ResponseEntity<String>> callable(@RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      return () -> {
        awaitGate(key);
        return send(key);
      };
    }

    @PostMapping(BASE + "deferred-callable")
    @IdempotentEndpoint
    public DeferredResult<Callable<ResponseEntity<String>>> deferredCallable(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      DeferredResult<Callable<ResponseEntity<String>>> result = new DeferredResult<>();
      APPLICATION.execute(
          () -> {
            awaitGate(key);
            result.setResult(() -> send(key));
          });
      return result;
    }

    @PostMapping(BASE + "deferred-value")
    @IdempotentEndpoint
    public DeferredResult<ResponseEntity<String>> deferredValue(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      DeferredResult<ResponseEntity<String>> result = new DeferredResult<>();
      APPLICATION.execute(
          () -> {
            awaitGate(key);
            result.setResult(send(key));
          });
      return result;
    }

    @PostMapping(BASE + "future-value")
    @IdempotentEndpoint
    public CompletableFuture<ResponseEntity<String>> futureValue(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      CompletableFuture<ResponseEntity<String>> future = new CompletableFuture<>();
      APPLICATION.execute(
          () -> {
            awaitGate(key);
            future.complete(send(key));
          });
      return future;
    }
  }
}
