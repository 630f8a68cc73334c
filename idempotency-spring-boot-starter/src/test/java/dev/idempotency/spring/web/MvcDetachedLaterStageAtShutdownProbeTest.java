package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.concurrent.Callable;
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
 * probeC, of fixlater (366e5d42), the shutdown side its author did not test: a {@code Callable}
 * still running at the request's 1 s async timeout (detached, not taken over) returns, after it, a
 * {@code DeferredResult} with a timeout of its own (60 s) that an application thread sets only
 * after it sent, and late: the starter awaits it on its taken-over pool ({@code
 * AsyncWork.continuedDetached}). The application is closed while that wait goes on (close grace 3
 * s, one graceful phase of 1 s). The close must not hang on the wait, and the key must not be
 * released: the retry after a restart on the same Redis (within the 60 s lease) must not send again
 * (SPEC 1): 422 (recorded as answered without its body when the grace ran out) or 409 (left as a
 * crash leaves a call). Two application starts: tagged extended.
 *
 * <p>Passes on Boot 3.5 (15 to 22 s) and 4.0 (17 to 19 s) at 7340e92a, twice each: the close took
 * about 2.1 s and the retry after the restart got 422 response-not-stored, one send.
 */
class MvcDetachedLaterStageAtShutdownProbeTest extends MvcDetachedAtShutdownProbe {

  private static final String PATH = "/probeC/shutdown/later-deferred";

  MvcDetachedLaterStageAtShutdownProbeTest() {
    super(LaterAtShutdownApplication.class, PATH, LaterAtShutdown.STAGE);
  }

  @Tag("extended")
  @Test
  void aDetachedCallablesLaterDeferredResultAwaitedAtShutdownIsNotSentAgain() throws Exception {
    Run run = closedDuringTheWaitThenRetried(EndpointClient.newKey());
    assertThat(run.firstAnswer()).as(run.seen()).startsWith("409");
    assertThat(run.sends()).as("sends: " + run.seen()).isEqualTo(1);
    assertThat(run.retry().statusCode()).as("the retry: " + run.seen()).isIn(409, 422);
  }

  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(LaterAtShutdown.class)
  static class LaterAtShutdownApplication {}

  @RestController
  static class LaterAtShutdown {
    static final LaterStage STAGE = new LaterStage();

    /**
     * Held (30 s at most) past the timeout by the gate; returns a DeferredResult (60 s timeout, no
     * timeout result) whose thread sends at once and sets it only once {@code late} opens.
     */
    @PostMapping(PATH)
    @IdempotentEndpoint
    public Callable<DeferredResult<String>> laterDeferred(
        @RequestHeader("Idempotency-Key") String key) {
      STAGE.entered.incrementAndGet();
      CountDownLatch held = STAGE.gate;
      CountDownLatch setLate = STAGE.late;
      return () -> {
        held.await(30, TimeUnit.SECONDS);
        DeferredResult<String> deferred = new DeferredResult<>(60_000L);
        Thread thread =
            new Thread(
                () -> {
                  int n = STAGE.send(key);
                  try {
                    setLate.await(60, TimeUnit.SECONDS);
                  } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                  }
                  deferred.setResult("sent-" + n);
                },
                "probeC-later");
        thread.setDaemon(true);
        thread.start();
        return deferred;
      };
    }
  }
}
