package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;

/**
 * The two cases of probeV's late-resolution probes (fb27539, fixed by fixlate2), each for a
 * Callable and a CompletableFuture: a failure answered on time (the control), and the same failure
 * after the container async timeout (1 s) answered the client 409, resolved late against the ended
 * request. A subclass names its endpoints (the path segment that picks the failure and how {@link
 * MvcLateResolutionApplication} maps it) and the status the application answers on time: a kept
 * 422, replayed to the retry, or a 5xx, which releases the key so that the retry sends. Either way
 * the provider sends once for one key (SPEC 1: at most one send, no lost send). All subclasses but
 * those with properties of their own share one application.
 */
@SpringBootTest(
    classes = MvcLateResolutionApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
    properties = {
      "idempotency.store=memory",
      "spring.mvc.async.request-timeout=1s",
      "idempotency.close-grace-period=1s"
    })
abstract class MvcLateResolutionCases implements EndpointClient {

  @LocalServerPort int port;

  private final String scenario;
  private final int onTimeStatus;

  /**
   * @param scenario the path segment of the endpoints, for example {@code late-fallback}
   * @param onTimeStatus what the application answers the failure on time: 422 (kept) or a 5xx
   *     (released: the provider refuses once, before sending, and the retry sends)
   */
  MvcLateResolutionCases(String scenario, int onTimeStatus) {
    this.scenario = scenario;
    this.onTimeStatus = onTimeStatus;
  }

  @Override
  public int port() {
    return port;
  }

  @Override
  public int runs() {
    return sends();
  }

  private int sends() {
    return MvcLateResolutionApplication.sends(scenario).get();
  }

  private boolean released() {
    return onTimeStatus >= 500;
  }

  @BeforeEach
  void reset() {
    MvcLateResolutionApplication.ProbeController.gate = new CountDownLatch(1);
    MvcLateResolutionApplication.ProbeController.refuseNext.set(released());
  }

  /**
   * The control: no timeout; the mapped failure (with the tenant) is stored and replayed, or, a
   * 5xx, releases the key and the retry sends.
   */
  @ParameterizedTest
  @ValueSource(strings = {"callable", "future"})
  void withoutATimeoutTheFailureIsAnsweredAsMapped(String kind) throws Exception {
    String key = EndpointClient.newKey();
    String path = "/probeV/" + scenario + "/" + kind + "?tenant=acme";
    int before = sends();
    MvcLateResolutionApplication.ProbeController.gate.countDown();

    HttpResponse<byte[]> first = post(path, key, "{}");
    HttpResponse<byte[]> retry = post(path, key, "{}");

    assertThat(first.statusCode()).as(EndpointClient.text(first)).isEqualTo(onTimeStatus);
    assertThat(EndpointClient.text(first)).contains("acme");
    if (released()) {
      assertThat(retry.statusCode()).as(EndpointClient.text(retry)).isEqualTo(200);
    } else {
      assertThat(retry.statusCode()).as(EndpointClient.text(retry)).isEqualTo(onTimeStatus);
      assertThat(EndpointClient.header(retry, "Idempotent-Replayed")).isEqualTo("true");
    }
    assertThat(sends() - before).as("provider sends").isEqualTo(1);
  }

  /**
   * The same failure after the container async timeout answered: one send, never two (and, where
   * the mapped status releases the key, never none).
   */
  @ParameterizedTest
  @ValueSource(strings = {"callable", "future"})
  void afterATimeoutTheProviderSendsOnce(String kind) throws Exception {
    String key = EndpointClient.newKey();
    String path = "/probeV/" + scenario + "/" + kind + "?tenant=acme";
    int before = sends();

    HttpResponse<byte[]> timedOut;
    try {
      timedOut = post(path, key, "{}", MvcLateResolutionApplication.HOLD, "true");
    } finally {
      MvcLateResolutionApplication.ProbeController.gate.countDown();
    }
    HttpResponse<byte[]> retry;
    long deadline = System.nanoTime() + Duration.ofSeconds(15).toNanos();
    do {
      retry = post(path, key, "{}");
    } while ((retry.statusCode() == 409 || (released() && retry.statusCode() == onTimeStatus))
        && System.nanoTime() < deadline);

    String answers =
        String.format(
            "first %s %s; retry %s replayed=%s %s",
            timedOut.statusCode(),
            EndpointClient.text(timedOut),
            retry.statusCode(),
            EndpointClient.header(retry, "Idempotent-Replayed"),
            EndpointClient.text(retry));
    assertThat(timedOut.statusCode()).as(answers).isEqualTo(409);
    if (released()) {
      assertThat(retry.statusCode()).as(answers).isEqualTo(200);
    }
    assertThat(sends() - before).as("provider sends for one key (%s)", answers).isEqualTo(1);
  }
}
