package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.http.HttpResponse;
import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Shapes that held at the probe37d re-probe of 50ca2f0 and eed7409 (the context of {@link
 * AsyncShapesTimeoutTest} and {@link ObjectDeclaredAsyncTimeoutTest}): a handler declared {@code
 * Object} returning a {@code WebAsyncTask}, a {@code CompletableFuture} subclass, an {@code
 * SseEmitter} or a {@code StreamingResponseBody} (one that wrote nothing, one that wrote part of
 * its answer) at runtime, whose provider call outlives the container timeout (1 s), ending once the
 * client has the timeout's answer: one provider send per key across the client's retries (SPEC 1,
 * 13, 16).
 */
@AsyncTimeoutApplicationTest
class AsyncShapesTimeoutHeldTest extends RunningApplication {

  @ParameterizedTest
  @ValueSource(strings = {"task", "own-future", "sse", "stream", "stream-part"})
  void aTimedOutObjectDeclaredHandlerSendsOncePerKey(String kind) throws Exception {
    sendsOncePerKey("/probe37d/object/" + kind);
  }

  /**
   * Probe41: a {@code StreamingResponseBody} behind a declared {@code Serializable}, which Spring
   * MVC runs by its runtime class and interrupts at the timeout; the work's wait for the provider
   * is interruptible.
   */
  @Test
  void aTimedOutSerializableDeclaredStreamSendsOncePerKey() throws Exception {
    sendsOncePerKey("/probe41/serializable-stream");
  }

  /**
   * Probe41: a {@code ResponseEntity<StreamingResponseBody>} with a {@code Location} header, whose
   * body the shield wraps in a new entity (built so that it links on Spring Framework 6 and 7).
   */
  @Test
  void aTimedOutEntityOfAStreamWithHeadersSendsOncePerKey() throws Exception {
    sendsOncePerKey("/probe41/entity-stream");
  }

  private void sendsOncePerKey(String path) throws Exception {
    String key = EndpointClient.newKey();
    int sendsBefore = AsyncShapesTimeoutTest.ProbeController.providerSends.get();

    // the provider's call ends once the client has the timeout's answer (AsyncShapesTimeoutTest's
    // gate), not after a fixed 2 s that a late timeout could outlast
    AsyncShapesTimeoutTest.ProbeController.gate = new CountDownLatch(1);
    HttpResponse<byte[]> timedOut;
    try {
      timedOut = post(path, key, "{}");
    } finally {
      AsyncShapesTimeoutTest.ProbeController.gate.countDown();
    }
    HttpResponse<byte[]> retry = timedOut;
    long deadline = System.nanoTime() + 15_000_000_000L;
    do {
      retry = post(path, key, "{}");
    } while (retry.statusCode() == 409 && System.nanoTime() < deadline);
    AsyncShapesTimeoutTest.awaitNoPendingSend();
    // a retry after the send ended: a released key would run the handler again
    HttpResponse<byte[]> late = post(path, key, "{}");
    AsyncShapesTimeoutTest.awaitNoPendingSend();

    assertThat(AsyncShapesTimeoutTest.ProbeController.providerSends.get() - sendsBefore)
        .as(
            "provider sends for one key (first %s %s, retry %s %s, late %s %s)",
            timedOut.statusCode(),
            EndpointClient.text(timedOut),
            retry.statusCode(),
            EndpointClient.text(retry),
            late.statusCode(),
            EndpointClient.text(late))
        .isEqualTo(1);
  }
}
