package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.testservers.Poll;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.catalina.connector.Connector;
import org.apache.catalina.startup.Tomcat;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;

/**
 * Probe (probeV): a synchronous Spring MVC {@code @IdempotentEndpoint} whose 2 s send is still
 * running on its request thread when Boot's graceful shutdown phase gives up ({@code
 * spring.lifecycle.timeout-per-shutdown-phase=1s}); Tomcat then stops, which shuts its request
 * executor down with {@code shutdownNow()} (an interrupt of the thread running the send) and waits
 * for its threads ({@link #TOMCAT_EXECUTOR_WAIT_MILLIS} here), and the starter's phase closes the
 * guard, waiting for the call (grace 20 s) before Spring Data Redis's factory (phase 0) stops. The
 * provider finishes its send whatever the interrupt (it keeps the flag set, as a well-behaved
 * blocking client that does not abort would), so SPEC 1/14/16: the outcome is recorded (the guard
 * writes on an interrupted thread) and the application started again on the same Redis (or
 * PostgreSQL) replays it: one send, nothing left in progress.
 *
 * <p>Passes on main a8f923a, Boot 3.5 and 4.0 (2/2 each, Redis and PostgreSQL; the log shows
 * 'Graceful shutdown aborted with one or more requests still active' and Tomcat's 'executor ... has
 * not fully shutdown' before the guard's phase). About 50 s (four application starts).
 */
class MvcSyncShutdownPhaseTimeoutProbeTest implements EndpointClient {

  private int port;

  @Override
  public int port() {
    return port;
  }

  @Override
  public int runs() {
    return ProbeController.runs.get();
  }

  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ProbeController.class)
  static class ProbeApplication {}

  @RestController
  static class ProbeController {
    static final AtomicInteger runs = new AtomicInteger();
    static final AtomicInteger sent = new AtomicInteger();
    static final AtomicInteger interrupted = new AtomicInteger();
    static volatile CountDownLatch gate = new CountDownLatch(1);

    /**
     * A send that takes at least 2 s (longer than the 1 s graceful phase and Tomcat's 500 ms wait
     * together, 3 s while Tomcat waited 5 s) and ends once the gate opens, interrupt or not.
     */
    @IdempotentEndpoint
    @PostMapping("/probeV/shutdown/sync")
    ResponseEntity<Map<String, String>> sync() {
      int run = runs.incrementAndGet();
      long earliest = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
      long latest = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      boolean wasInterrupted = false;
      while (System.nanoTime() < latest && (gate.getCount() > 0 || System.nanoTime() < earliest)) {
        try {
          gate.await(10, TimeUnit.MILLISECONDS);
          if (gate.getCount() == 0) {
            Thread.sleep(10);
          }
        } catch (InterruptedException e) {
          wasInterrupted = true;
        }
      }
      sent.incrementAndGet();
      if (wasInterrupted) {
        interrupted.incrementAndGet();
        Thread.currentThread().interrupt(); // kept for the caller, as a blocking client does
      }
      return ResponseEntity.status(201).body(Map.of("id", "sent-" + run));
    }
  }

  /**
   * How long Tomcat's stop waits for its request threads after {@code shutdownNow()} before it
   * gives up ('has not fully shutdown'): its {@code executorTerminationTimeoutMillis}, 5 s by
   * default, is 500 ms in the first application here. The send is held until the guard is closing,
   * which comes after that wait whatever its length, so the case is the same with either (the send
   * outlives the graceful phase, Tomcat's wait and the start of the guard's close); the default
   * only made each case 4.5 s longer.
   */
  static final long TOMCAT_EXECUTOR_WAIT_MILLIS = 500;

  /**
   * Sets {@link #TOMCAT_EXECUTOR_WAIT_MILLIS} on the application's Tomcat connectors. The context's
   * {@code getWebServer()} and {@code TomcatWebServer} are in other packages on Boot 3.5 and 4.0,
   * so they are reached by name; the connector is Tomcat's own.
   */
  private static void shortenTomcatsExecutorWait(ConfigurableApplicationContext application)
      throws ReflectiveOperationException {
    Object webServer = application.getClass().getMethod("getWebServer").invoke(application);
    Tomcat tomcat = (Tomcat) webServer.getClass().getMethod("getTomcat").invoke(webServer);
    Connector[] connectors = tomcat.getService().findConnectors();
    assertThat(connectors).isNotEmpty();
    for (Connector connector : connectors) {
      assertThat(
              connector.setProperty(
                  "executorTerminationTimeoutMillis", Long.toString(TOMCAT_EXECUTOR_WAIT_MILLIS)))
          .as("Tomcat's executorTerminationTimeoutMillis set")
          .isTrue();
    }
  }

  private static ConfigurableApplicationContext start(String store, CountDownLatch closing) {
    return MvcProbes.startOn(
        ProbeApplication.class,
        store,
        closing,
        "spring.jmx.enabled=false",
        "spring.lifecycle.timeout-per-shutdown-phase=1s");
  }

  private static boolean isClosed(IdempotencyGuard guard) {
    try {
      guard.execute("probeV-closing:" + UUID.randomUUID(), Duration.ofMinutes(1), c -> "nothing");
      return false;
    } catch (IllegalStateException closed) {
      return true;
    }
  }

  @ParameterizedTest
  @ValueSource(strings = {"redis", "postgres"})
  void aSynchronousSendOutlivingTheGracefulPhaseIsRecordedAndReplayed(String store)
      throws Exception {
    String key = EndpointClient.newKey();
    String path = "/probeV/shutdown/sync";
    ProbeController.gate = new CountDownLatch(1);
    int before = runs();
    int sentBefore = ProbeController.sent.get();
    int interruptedBefore = ProbeController.interrupted.get();
    CountDownLatch closing = new CountDownLatch(1);
    ConfigurableApplicationContext first = start(store, closing);
    CompletableFuture<Void> closed;
    CompletableFuture<String> answered;
    try {
      shortenTomcatsExecutorWait(first);
      port = first.getEnvironment().getRequiredProperty("local.server.port", Integer.class);
      IdempotencyGuard guard = first.getBean(IdempotencyGuard.class);
      answered =
          CompletableFuture.supplyAsync(
              () -> {
                try {
                  HttpResponse<byte[]> answer = post(path, key, "{}");
                  return answer.statusCode() + " " + EndpointClient.text(answer);
                } catch (Exception e) {
                  return "no answer: " + e;
                }
              });
      Poll.within(Duration.ofSeconds(30)).until("the handler running", () -> runs() > before);
      closed = CompletableFuture.runAsync(first::close);
      assertThat(closing.await(30, TimeUnit.SECONDS)).as("the shutdown began").isTrue();
      Poll.within(Duration.ofSeconds(60)).until("the guard closing", () -> isClosed(guard));
    } finally {
      ProbeController.gate.countDown();
    }
    closed.get(90, TimeUnit.SECONDS);
    String firstAnswer = answered.completeOnTimeout("no answer yet", 60, TimeUnit.SECONDS).get();
    String during =
        String.format(
            "first %s; the send's thread interrupted: %s",
            firstAnswer, ProbeController.interrupted.get() - interruptedBefore > 0);
    assertThat(ProbeController.sent.get() - sentBefore)
        .as("the send happened during the shutdown (%s)", during)
        .isEqualTo(1);

    HttpResponse<byte[]> replay;
    try (ConfigurableApplicationContext second = start(store, new CountDownLatch(1))) {
      port = second.getEnvironment().getRequiredProperty("local.server.port", Integer.class);
      long deadline = System.nanoTime() + Duration.ofSeconds(15).toNanos();
      do {
        replay = post(path, key, "{}");
      } while (replay.statusCode() == 409 && System.nanoTime() < deadline);
    }
    String answers =
        String.format(
            "%s; after the restart %s replayed=%s %s",
            during,
            replay.statusCode(),
            EndpointClient.header(replay, "Idempotent-Replayed"),
            EndpointClient.text(replay));
    assertThat(runs() - before).as("handler runs (%s)", answers).isEqualTo(1);
    assertThat(replay.statusCode()).as(answers).isEqualTo(201);
    assertThat(EndpointClient.header(replay, "Idempotent-Replayed")).as(answers).isEqualTo("true");
  }
}
