package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.context.request.async.DeferredResult;

/**
 * probeE, of fixstage (4e0a736f), the shutdown side: a handler's own {@code CompletableFuture} (no
 * {@code Callable}), completed by an application thread after the request's 1 s async timeout with
 * a {@code DeferredResult} of no timeout of its own, which the starter then awaits (up to 30 s, the
 * request's async timeout not read) on its taken-over pool; that result's thread sends at once and
 * sets it only after the close. The application is closed during that wait (close grace 3 s, one
 * graceful phase of 1 s): the close must not hang on the wait (the continuation is kept where the
 * close grace reaches it: {@code AsyncWork.takenOverGraceRunsOut}), and the key must not be
 * released: the retry after a restart on the same Redis (within the 60 s lease) must not send again
 * (SPEC 1), and the call must have been recorded within the close grace (422, answered without its
 * body when the grace ran out), not left in progress as a crash leaves it (409 until the lease runs
 * out). Two application starts: tagged extended.
 *
 * <p>Passes at 4de4bf36 on Boot 3.5 and 4.0, twice each (once with 409 still accepted, once as now,
 * 422 only); 67 to 205 s on a machine at a load average of 17 to 60, mostly the two starts.
 */
class MvcDetachedStageAtShutdownProbeTest extends MvcDetachedAtShutdownProbe {

  private static final String PATH = "/probeE/shutdown/stage-later-deferred";

  MvcDetachedStageAtShutdownProbeTest() {
    super(StageAtShutdownApplication.class, PATH, StageAtShutdown.STAGE);
  }

  @Tag("extended")
  @Test
  void aDetachedStagesLaterDeferredResultAwaitedAtShutdownIsNotSentAgain() throws Exception {
    Run run = closedDuringTheWaitThenRetried(EndpointClient.newKey());
    assertThat(run.firstAnswer()).as(run.seen()).startsWith("409");
    assertThat(run.sends()).as("sends: " + run.seen()).isEqualTo(1);
    assertThat(run.retry().statusCode()).as("the retry: " + run.seen()).isEqualTo(422);
    assertThat(run.closeMillis()).as("the close: " + run.seen()).isLessThan(15_000);
  }

  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(StageAtShutdown.class)
  static class StageAtShutdownApplication {}

  @RestController
  static class StageAtShutdown {
    static final LaterStage STAGE = new LaterStage();

    /**
     * A stage completed once the gate opens (30 s at most) with a DeferredResult (no timeout of its
     * own, no timeout result) whose thread sends at once and sets it only once {@code late} opens.
     */
    @PostMapping(PATH)
    @IdempotentEndpoint
    public CompletableFuture<DeferredResult<String>> stageLaterDeferred(
        @RequestHeader("Idempotency-Key") String key) {
      STAGE.entered.incrementAndGet();
      CountDownLatch held = STAGE.gate;
      CountDownLatch setLate = STAGE.late;
      CompletableFuture<DeferredResult<String>> stage = new CompletableFuture<>();
      Thread thread =
          new Thread(
              () -> {
                try {
                  held.await(30, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                  Thread.currentThread().interrupt();
                }
                DeferredResult<String> deferred = new DeferredResult<>();
                stage.complete(deferred);
                int n = STAGE.send(key);
                try {
                  setLate.await(60, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                  Thread.currentThread().interrupt();
                }
                deferred.setResult("sent-" + n);
              },
              "probeE-stage");
      thread.setDaemon(true);
      thread.start();
      return stage;
    }
  }
}
