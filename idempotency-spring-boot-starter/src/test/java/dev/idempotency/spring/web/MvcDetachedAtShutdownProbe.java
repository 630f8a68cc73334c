package dev.idempotency.spring.web;

import dev.idempotency.testservers.Poll;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * The set-up the MVC probes of a detached stage awaited at a shutdown share: an application on a
 * real Redis (a 1 s async timeout, close grace 3 s, one graceful phase of 1 s, a 60 s lease) whose
 * handler's later stage sends once its gate opens and answers only once it is let go, after the
 * close; the application is closed while the starter awaits that answer, then started again on the
 * same Redis for the retry ({@link #closedDuringTheWaitThenRetried}). The probe asserts what it
 * expects of the close and the retry.
 */
abstract class MvcDetachedAtShutdownProbe implements EndpointClient {

  private final Class<?> applicationClass;
  private final String path;
  private final LaterStage stage;
  private int port;

  /**
   * @param applicationClass the probe's application
   * @param path the path of its guarded handler
   * @param stage what its handler shares with the probe
   */
  MvcDetachedAtShutdownProbe(Class<?> applicationClass, String path, LaterStage stage) {
    this.applicationClass = applicationClass;
    this.path = path;
    this.stage = stage;
  }

  @Override
  public int port() {
    return port;
  }

  @Override
  public int runs() {
    return stage.entered.get();
  }

  private ConfigurableApplicationContext start() {
    return MvcProbes.startOn(
        applicationClass,
        "redis",
        new CountDownLatch(1),
        "spring.lifecycle.timeout-per-shutdown-phase=1s",
        "spring.mvc.async.request-timeout=1s",
        "idempotency.close-grace-period=3s",
        "idempotency.lease=60s");
  }

  /**
   * Posts with {@code key} (answered at the timeout), opens the gate, waits (30 s at most) until
   * the later stage sent, closes the application (60 s at most) while the starter awaits the
   * stage's answer, lets the stage answer, then starts the application again and retries.
   */
  Run closedDuringTheWaitThenRetried(String key) throws Exception {
    CountDownLatch gate = new CountDownLatch(1);
    CountDownLatch late = new CountDownLatch(1);
    stage.gate = gate;
    stage.late = late;
    ConfigurableApplicationContext first = start();
    String firstAnswer;
    long closeMillis;
    try {
      port = MvcProbes.portOf(first);
      HttpResponse<byte[]> answer = post(path, key, "{}");
      firstAnswer = MvcProbes.replayed(answer);
      gate.countDown(); // the later stage begins, and its thread sends
      Poll.within(Duration.ofSeconds(30))
          .until("the later stage sent: " + firstAnswer, () -> stage.sendsOf(key) == 1);
      long closing = System.nanoTime();
      CompletableFuture.runAsync(first::close).get(60, TimeUnit.SECONDS);
      closeMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - closing);
    } finally {
      gate.countDown();
      late.countDown(); // the later stage answers, after the close
    }
    HttpResponse<byte[]> retry;
    try (ConfigurableApplicationContext second = start()) {
      port = MvcProbes.portOf(second);
      retry = post(path, key, "{}");
    }
    return new Run(firstAnswer, closeMillis, retry, stage.sendsOf(key));
  }

  /**
   * What a probe saw: the first answer ({@link MvcProbes#replayed}), how long the close took, the
   * retry after the restart, and the sends for the key.
   */
  record Run(String firstAnswer, long closeMillis, HttpResponse<byte[]> retry, int sends) {
    /** All of it, for an assertion's description. */
    String seen() {
      return String.format(
          "first answer %s; close took %d ms; retry after the restart %s; sends %d",
          firstAnswer, closeMillis, MvcProbes.replayed(retry), sends);
    }
  }

  /**
   * What a probe's handler shares with the probe: how often it ran, its sends per key, the gate its
   * later stage waits for before it sends, and the latch it waits for before it answers.
   */
  static final class LaterStage {
    final AtomicInteger entered = new AtomicInteger();
    private final Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();
    volatile CountDownLatch gate = new CountDownLatch(0);
    volatile CountDownLatch late = new CountDownLatch(0);

    int sendsOf(String key) {
      AtomicInteger n = sends.get(key);
      return n == null ? 0 : n.get();
    }

    /** Sends for {@code key}: how many sends for it there were then. */
    int send(String key) {
      return sends.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
    }
  }
}
