package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.spring.EmbeddedServers;
import dev.idempotency.spring.Idempotent;
import dev.idempotency.spring.reactive.NettyServer;
import dev.idempotency.testservers.Poll;
import java.lang.reflect.Method;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ApplicationListener;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.context.event.ContextClosedEvent;
import org.springframework.http.ResponseEntity;
import org.springframework.http.client.ReactorResourceFactory;
import org.springframework.util.ReflectionUtils;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;
import reactor.core.publisher.Mono;

/**
 * Probe (probeV) of an application shutdown with a short {@code
 * spring.lifecycle.timeout-per-shutdown-phase} (1 s) while a 3 s send is in flight, on Redis
 * through Spring Data Redis (Lettuce's factory stops at phase 0, after the starter closes the
 * guard), Reactor Netty with graceful shutdown: a WebFlux {@code @IdempotentEndpoint} ({@code
 * endpoint}), an {@code Idempotent} method returning a {@code CompletableFuture} called by the
 * application ({@code stage}), and an {@code @Idempotent} method returning a {@code Mono} that a
 * plain WebFlux handler returns ({@code mono}). The send is held until the guard is closing, which
 * comes after the graceful phase gave up (the guard closes in a later phase), so it outlives the
 * graceful phase, and the web server stops under the WebFlux requests. SPEC 1, 14, 16: the send
 * goes on, its outcome is recorded within the guard's grace period (20 s), and the application
 * started again on the same Redis replays it: one send, no key left in progress.
 *
 * <p>Passes on main a8f923a, Boot 3.5 and 4.0 (3/3 each; the log shows 'Graceful shutdown aborted
 * with one or more requests still active' before the guard's phase, so the case is exercised):
 * unlike the MVC async request of MvcShutdownPhaseTimeoutProbeTest, these calls end with their
 * send, not with a dispatch back to the stopped server.
 *
 * <p>The application started again on Redis, which must replay each case's send, is one for the
 * class (each case has its own key): started at the first case's retry, closed after the last. Only
 * the first application of each case is shut down mid-send: four application starts.
 */
class ReactiveShutdownPhaseTimeoutProbeTest implements EndpointClient {

  /** The application started again on Redis, shared by the cases. */
  private static ConfigurableApplicationContext restarted;

  private int port;

  @AfterAll
  static void closeTheRestartedApplication() {
    if (restarted != null) {
      restarted.close();
      restarted = null;
    }
  }

  @Override
  public int port() {
    return port;
  }

  @Override
  public int runs() {
    return Probe.runs.get();
  }

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import({NettyServer.class, Probe.class})
  static class ProbeApplication {

    /** Reactor Netty resources of the application's own (as SuiteWebFluxApplication). */
    @Bean
    ReactorResourceFactory reactorResourceFactory() {
      ReactorResourceFactory resources = new ReactorResourceFactory();
      resources.setUseGlobalResources(false);
      // the event loops' quiet period once the application closed (2 s by default) is no part of
      // the case: the guard and the store closed before the resources are disposed
      resources.setShutdownQuietPeriod(Duration.ZERO);
      return resources;
    }

    @Bean
    static BeanPostProcessor serverOnOwnResources(
        ObjectProvider<ReactorResourceFactory> resources) {
      return new BeanPostProcessor() {
        @Override
        public Object postProcessBeforeInitialization(Object bean, String name) {
          Method setter =
              ReflectionUtils.findMethod(
                  bean.getClass(), "setResourceFactory", ReactorResourceFactory.class);
          if (setter != null && bean.getClass().getSimpleName().startsWith("Netty")) {
            ReflectionUtils.invokeMethod(setter, bean, resources.getObject());
          }
          return bean;
        }
      };
    }

    @Bean
    Sender sender() {
      return new Sender();
    }
  }

  /**
   * The provider: a send ends once the test opens the gate, which it does once the guard is
   * closing.
   */
  static final class Provider {
    static final AtomicInteger sent = new AtomicInteger();
    static volatile CompletableFuture<Void> gate = new CompletableFuture<>();
    static final ExecutorService THREADS = Executors.newCachedThreadPool();

    static String sendBlocking(String id) {
      try {
        gate.get(60, TimeUnit.SECONDS);
      } catch (Exception e) {
        throw new IllegalStateException("the provider call did not end: " + e, e);
      }
      sent.incrementAndGet();
      return "sent-" + id;
    }

    static Mono<String> sendReactive(String id) {
      return Mono.fromFuture(gate.copy())
          .then(Mono.delay(Duration.ofMillis(50))) // it goes on on a Reactor thread, as before
          .then(Mono.fromCallable(() -> sent.incrementAndGet()))
          .map(n -> "sent-" + id);
    }
  }

  /** The application's guarded methods. */
  public static class Sender {
    @Idempotent(name = "probeV.stage", key = "#id")
    public CompletableFuture<String> stage(String id) {
      Probe.runs.incrementAndGet();
      return CompletableFuture.supplyAsync(() -> Provider.sendBlocking(id), Provider.THREADS);
    }

    @Idempotent(name = "probeV.mono", key = "#id")
    public Mono<String> mono(String id) {
      return Mono.defer(
          () -> {
            Probe.runs.incrementAndGet();
            return Provider.sendReactive(id);
          });
    }
  }

  @RestController
  public static class Probe {
    static final AtomicInteger runs = new AtomicInteger();
    private final Sender sender;

    public Probe(Sender sender) {
      this.sender = sender;
    }

    @PostMapping("/probeV/endpoint/{id}")
    @IdempotentEndpoint
    public Mono<ResponseEntity<Map<String, String>>> endpoint(@PathVariable String id) {
      return Mono.defer(
          () -> {
            runs.incrementAndGet();
            return Provider.sendReactive(id)
                .map(receipt -> ResponseEntity.status(201).body(Map.of("id", receipt)));
          });
    }

    @PostMapping("/probeV/mono/{id}")
    public Mono<Map<String, String>> mono(@PathVariable String id) {
      return sender.mono(id).map(receipt -> Map.of("id", receipt));
    }
  }

  private static ConfigurableApplicationContext start(CountDownLatch closing) {
    return new SpringApplicationBuilder(ProbeApplication.class)
        .web(WebApplicationType.REACTIVE)
        .listeners((ApplicationListener<ContextClosedEvent>) closed -> closing.countDown())
        .properties(
            "server.port=0",
            "server.address=127.0.0.1",
            "server.shutdown=graceful",
            "spring.main.banner-mode=off",
            "spring.jmx.enabled=false",
            "idempotency.close-grace-period=20s",
            "spring.lifecycle.timeout-per-shutdown-phase=1s",
            "idempotency.store=redis",
            "spring.data.redis.host=127.0.0.1",
            "spring.data.redis.port=" + EmbeddedServers.redisPort())
        .run();
  }

  private static boolean isClosed(IdempotencyGuard guard) {
    try {
      guard.execute("probeV-closing:" + UUID.randomUUID(), Duration.ofMinutes(1), c -> "nothing");
      return false;
    } catch (IllegalStateException closed) {
      return true;
    }
  }

  /** Starts the send of {@code kind} in {@code context}; its answer (or failure) as text. */
  private CompletableFuture<String> call(
      String kind, ConfigurableApplicationContext context, String id, String key) {
    if (kind.equals("stage")) {
      return context
          .getBean(Sender.class)
          .stage(id)
          .handle((value, failure) -> failure != null ? "failed: " + failure : value);
    }
    return CompletableFuture.supplyAsync(
        () -> {
          try {
            HttpResponse<byte[]> answer = post("/probeV/" + kind + "/" + id, key, "{}");
            return answer.statusCode()
                + " replayed="
                + EndpointClient.header(answer, "Idempotent-Replayed")
                + " "
                + EndpointClient.text(answer);
          } catch (Exception e) {
            return "no answer: " + e;
          }
        });
  }

  @ParameterizedTest
  @ValueSource(strings = {"endpoint", "stage", "mono"})
  void aSendOutlivingTheGracefulPhaseIsRecordedAndReplayedAfterTheRestart(String kind)
      throws Exception {
    String id = UUID.randomUUID().toString();
    String key = EndpointClient.newKey();
    Provider.gate = new CompletableFuture<>();
    int before = runs();
    int sentBefore = Provider.sent.get();
    CountDownLatch closing = new CountDownLatch(1);
    ConfigurableApplicationContext first = start(closing);
    CompletableFuture<Void> closed;
    CompletableFuture<String> answered;
    try {
      port = first.getEnvironment().getRequiredProperty("local.server.port", Integer.class);
      IdempotencyGuard guard = first.getBean(IdempotencyGuard.class);
      answered = call(kind, first, id, key);
      Poll.within(Duration.ofSeconds(30)).until("the send running", () -> runs() > before);
      closed = CompletableFuture.runAsync(first::close);
      assertThat(closing.await(30, TimeUnit.SECONDS)).as("the shutdown began").isTrue();
      Poll.within(Duration.ofSeconds(60)).until("the guard closing", () -> isClosed(guard));
    } finally {
      Provider.gate.complete(null);
    }
    closed.get(90, TimeUnit.SECONDS);
    String firstAnswer = answered.completeOnTimeout("no answer yet", 60, TimeUnit.SECONDS).get();
    assertThat(Provider.sent.get() - sentBefore)
        .as("the send happened during the shutdown (first: %s)", firstAnswer)
        .isEqualTo(1);

    String retry;
    if (restarted == null) {
      restarted = start(new CountDownLatch(1));
    }
    ConfigurableApplicationContext second = restarted;
    port = second.getEnvironment().getRequiredProperty("local.server.port", Integer.class);
    long deadline = System.nanoTime() + Duration.ofSeconds(15).toNanos();
    do {
      retry = call(kind, second, id, key).get(60, TimeUnit.SECONDS);
    } while ((retry.startsWith("409") || retry.contains("InProgress"))
        && System.nanoTime() < deadline);
    String answers = String.format("first %s; after the restart %s", firstAnswer, retry);
    assertThat(runs() - before).as("sends started (%s)", answers).isEqualTo(1);
    assertThat(Provider.sent.get() - sentBefore).as("provider sends (%s)", answers).isEqualTo(1);
    assertThat(retry).as(answers).contains("sent-" + id);
    if (kind.equals("endpoint")) {
      assertThat(retry).as(answers).startsWith("201 replayed=true");
    }
  }
}
