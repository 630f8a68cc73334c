package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.app.AsyncController;
import dev.idempotency.spring.app.NotifyTestApplication;
import java.net.http.HttpResponse;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;

/**
 * A container async timeout (1 s) that fires while the provider call still runs ends the request,
 * not the send: the client gets a 409 in progress, the key stays claimed, the outcome is stored
 * when the send ends, and the client's retry gets it replayed: one provider send (SPEC 13, 16).
 */
@SpringBootTest(
    classes = NotifyTestApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
    properties = {"idempotency.store=memory", "spring.mvc.async.request-timeout=1s"})
class AsyncTimeoutEndpointTest extends RunningApplication {

  @Autowired AsyncController controller;

  @ParameterizedTest
  @ValueSource(
      strings = {"future", "callable", "interruptible-callable", "interruptible-task", "deferred"})
  void aTimedOutRequestKeepsItsKeyAndItsRetryGetsTheStoredResponse(String kind) throws Exception {
    String key = EndpointClient.newKey();
    String path = "/async/slow/" + kind;
    int sendsBefore = controller.providerSends();

    HttpResponse<byte[]> timedOut = postThenLetTheProviderAnswer(path, key);
    HttpResponse<byte[]> replay = MvcProbes.retryWhileInProgress(this, path, key);

    assertThat(timedOut.statusCode()).as(EndpointClient.text(timedOut)).isEqualTo(409);
    assertThat(EndpointClient.header(timedOut, "Retry-After")).isNotNull();
    assertThat(EndpointClient.text(timedOut)).contains("/problems/request-in-progress");
    assertReplayed(replay, kind);
    assertThat(controller.providerSends() - sendsBefore).as("one provider send").isEqualTo(1);
    assertThat(runs()).as("the handler ran once").isEqualTo(1);
  }

  /**
   * A {@code WebAsyncTask} with its own timeout answer: the client gets that answer, and the key
   * stays claimed until the send ends, its response stored and replayed.
   */
  @Test
  void aTaskWithItsOwnTimeoutAnswerKeepsItsKeyToo() throws Exception {
    String key = EndpointClient.newKey();
    String path = "/async/slow/task-on-timeout";
    int sendsBefore = controller.providerSends();

    HttpResponse<byte[]> timedOut = postThenLetTheProviderAnswer(path, key);
    HttpResponse<byte[]> replay = MvcProbes.retryWhileInProgress(this, path, key);

    assertThat(timedOut.statusCode()).as(EndpointClient.text(timedOut)).isEqualTo(503);
    assertReplayed(replay, "task-on-timeout");
    assertThat(controller.providerSends() - sendsBefore).as("one provider send").isEqualTo(1);
    assertThat(runs()).as("the handler ran once").isEqualTo(1);
  }

  /**
   * A late failure that maps to a 4xx ({@code ResponseStatusException(404)}) is stored as the
   * synchronous path would store it: the retry gets the 404 replayed, no second send.
   */
  @Test
  void aLateFailureThatMapsToA4xxIsStored() throws Exception {
    String key = EndpointClient.newKey();
    String path = "/async/slow/not-found";
    int sendsBefore = controller.providerSends();

    HttpResponse<byte[]> timedOut = postThenLetTheProviderAnswer(path, key);
    HttpResponse<byte[]> replay = MvcProbes.retryWhileInProgress(this, path, key);
    HttpResponse<byte[]> again = post(path, key, "{}");

    assertThat(timedOut.statusCode()).as(EndpointClient.text(timedOut)).isEqualTo(409);
    assertThat(replay.statusCode()).as(EndpointClient.text(replay)).isEqualTo(404);
    assertThat(EndpointClient.header(replay, "Idempotent-Replayed")).isEqualTo("true");
    assertThat(again.statusCode()).isEqualTo(404);
    assertThat(controller.providerSends() - sendsBefore).as("one provider send").isEqualTo(1);
    assertThat(runs()).as("the handler ran once").isEqualTo(1);
  }

  /**
   * The result came (the provider sent) but Spring MVC had not yet seen it when the container
   * timeout fired: the result is the answer and is stored, not a 503 that releases the key (the
   * end-to-end run's seed 7 sent a key twice this way, on a loaded machine).
   */
  @Test
  void aResultThatCameJustBeforeTheTimeoutIsTheAnswerAndIsStored() throws Exception {
    String key = EndpointClient.newKey();
    String path = "/async/race/future";
    int sendsBefore = controller.providerSends();

    HttpResponse<byte[]> first;
    try {
      first = post(path, key, "{}");
    } finally {
      controller.openRaceGate();
    }
    HttpResponse<byte[]> retry = MvcProbes.retryWhileInProgress(this, path, key);

    assertThat(first.statusCode()).as(EndpointClient.text(first)).isEqualTo(201);
    assertThat(retry.statusCode()).as(EndpointClient.text(retry)).isEqualTo(201);
    assertThat(EndpointClient.header(retry, "Idempotent-Replayed")).isEqualTo("true");
    assertThat(EndpointClient.text(retry)).isEqualTo(EndpointClient.text(first));
    assertThat(controller.providerSends() - sendsBefore).as("one provider send").isEqualTo(1);
  }

  /**
   * The first request, answered at the container timeout while its provider call waits; then that
   * call may answer (its send ends after the timeout, as a slow provider's would).
   */
  private HttpResponse<byte[]> postThenLetTheProviderAnswer(String path, String key)
      throws Exception {
    try {
      return post(path, key, "{}");
    } finally {
      controller.answerProviderCalls();
    }
  }

  /** Retries (bounded, 15 s) while the first request's work runs; the first other answer. */
  private static void assertReplayed(HttpResponse<byte[]> replay, String kind) {
    assertThat(replay.statusCode()).as(EndpointClient.text(replay)).isEqualTo(201);
    assertThat(EndpointClient.header(replay, "Idempotent-Replayed")).isEqualTo("true");
    assertThat(EndpointClient.text(replay)).contains("\"id\":\"slow-" + kind + "_");
    assertThat(EndpointClient.header(replay, "Location")).startsWith("/async/slow-" + kind + "_");
  }
}
