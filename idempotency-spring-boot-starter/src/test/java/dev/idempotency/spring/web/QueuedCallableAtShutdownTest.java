package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.spring.web.MvcProbes.HeldSends;
import dev.idempotency.testservers.Poll;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * A shutdown that cuts off two {@code Callable} requests (Spring MVC's async executor has one
 * thread, graceful phase 1 s): the first one's work runs (its send held), the second one's task is
 * still queued behind it. SPEC 1/14: the first send is recorded from its result and replayed after
 * the restart; the queued work, which Spring MVC would never run now, is taken over and run by the
 * starter within the guard's close grace (its send held too, until the guard closes), its result
 * recorded and replayed after the restart: one send for each key, none lost, none twice. Until
 * fixqueue the queued work was abandoned and its key released, and the retry after the restart ran
 * the handler (a second send if the handler method had sent: MvcQueuedWorkAtShutdownProbeTest).
 */
class QueuedCallableAtShutdownTest implements EndpointClient {

  private int port;

  @Override
  public int port() {
    return port;
  }

  @Override
  public int runs() {
    return HeldSends.runs.get();
  }

  private static ConfigurableApplicationContext start(CountDownLatch closing) {
    return MvcProbes.startOn(
        MvcProbes.HeldSendApplication.class,
        "redis",
        closing,
        "spring.lifecycle.timeout-per-shutdown-phase=1s",
        "spring.task.execution.pool.core-size=1");
  }

  private static boolean isClosed(IdempotencyGuard guard) {
    try {
      guard.execute("probe-closing:" + UUID.randomUUID(), Duration.ofMinutes(1), c -> "nothing");
      return false;
    } catch (IllegalStateException closed) {
      return true;
    }
  }

  @Test
  void theRunningSendAndTheQueuedOneTakenOverAreBothRecorded() throws Exception {
    String running = EndpointClient.newKey();
    String queued = EndpointClient.newKey();
    String path = "/probe/held/callable";
    HeldSends.gate = new CountDownLatch(1);
    int before = runs();
    int sentBefore = HeldSends.sent.get();
    CountDownLatch closing = new CountDownLatch(1);
    ConfigurableApplicationContext first = start(closing);
    CompletableFuture<Void> closed;
    try {
      port = MvcProbes.portOf(first);
      IdempotencyGuard guard = first.getBean(IdempotencyGuard.class);
      MvcProbes.postAsync(this, path, running);
      Poll.within(Duration.ofSeconds(30)).until("the first handler ran", () -> runs() > before);
      MvcProbes.postAsync(this, path, queued);
      Poll.within(Duration.ofSeconds(30))
          .until("the second handler ran", () -> runs() > before + 1);
      closed = CompletableFuture.runAsync(first::close);
      assertThat(closing.await(30, TimeUnit.SECONDS)).as("the shutdown began").isTrue();
      Poll.within(Duration.ofSeconds(60)).until("the guard closing", () -> isClosed(guard));
    } finally {
      HeldSends.gate.countDown();
    }
    closed.get(60, TimeUnit.SECONDS);
    assertThat(HeldSends.sent.get() - sentBefore).as("sends during the shutdown").isEqualTo(2);

    HttpResponse<byte[]> replay;
    HttpResponse<byte[]> retry;
    try (ConfigurableApplicationContext second = start(new CountDownLatch(1))) {
      port = MvcProbes.portOf(second);
      replay = MvcProbes.retryWhileInProgress(this, path, running);
      retry = MvcProbes.retryWhileInProgress(this, path, queued);
    }
    String answers =
        String.format(
            "running: %s; queued: %s", MvcProbes.replayed(replay), MvcProbes.replayed(retry));
    assertThat(replay.statusCode()).as(answers).isEqualTo(201);
    assertThat(EndpointClient.header(replay, "Idempotent-Replayed")).as(answers).isEqualTo("true");
    assertThat(retry.statusCode()).as(answers).isEqualTo(201);
    assertThat(EndpointClient.header(retry, "Idempotent-Replayed")).as(answers).isEqualTo("true");
    assertThat(HeldSends.sent.get() - sentBefore).as("sends in all (%s)", answers).isEqualTo(2);
  }
}
