package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.app.AsyncController;
import dev.idempotency.spring.app.NotifyTestApplication;
import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;

/**
 * A container async timeout (1 s) that fires while the provider call (2 s) still runs ends the
 * request, not the send: the client gets a 409 in progress, the key stays claimed, the outcome is
 * stored when the send ends, and the client's retry gets it replayed: one provider send (SPEC 13,
 * 16).
 */
@SpringBootTest(
    classes = NotifyTestApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
    properties = {"idempotency.store=memory", "spring.mvc.async.request-timeout=1s"})
class AsyncTimeoutEndpointTest extends RunningApplication {

  @Autowired AsyncController controller;

  @ParameterizedTest
  @ValueSource(strings = {"future", "callable"})
  void aTimedOutRequestKeepsItsKeyAndItsRetryGetsTheStoredResponse(String kind) throws Exception {
    String key = EndpointClient.newKey();
    String path = "/async/slow/" + kind;
    int sendsBefore = controller.providerSends();

    HttpResponse<byte[]> timedOut = post(path, key, "{}");
    List<HttpResponse<byte[]>> retries = new ArrayList<>();
    long deadline = System.nanoTime() + 60_000_000_000L;
    do {
      retries.add(post(path, key, "{}"));
    } while (retries.get(retries.size() - 1).statusCode() == 409 && System.nanoTime() < deadline);
    HttpResponse<byte[]> replay = retries.get(retries.size() - 1);

    assertThat(timedOut.statusCode()).as(EndpointClient.text(timedOut)).isEqualTo(409);
    assertThat(EndpointClient.header(timedOut, "Retry-After")).isNotNull();
    assertThat(EndpointClient.text(timedOut)).contains("/problems/request-in-progress");
    assertThat(replay.statusCode()).as(EndpointClient.text(replay)).isEqualTo(201);
    assertThat(EndpointClient.header(replay, "Idempotent-Replayed")).isEqualTo("true");
    assertThat(EndpointClient.text(replay)).contains("\"id\":\"slow-" + kind + "_");
    assertThat(EndpointClient.header(replay, "Location")).startsWith("/async/slow-" + kind + "_");
    assertThat(controller.providerSends() - sendsBefore).as("one provider send").isEqualTo(1);
    assertThat(runs()).as("the handler ran once").isEqualTo(1);
  }
}
