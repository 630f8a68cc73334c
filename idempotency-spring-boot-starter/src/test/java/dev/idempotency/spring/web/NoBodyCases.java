package dev.idempotency.spring.web;

import static dev.idempotency.spring.web.EndpointClient.header;
import static dev.idempotency.spring.web.EndpointClient.newKey;
import static org.assertj.core.api.Assertions.assertThat;

import java.net.http.HttpResponse;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Handlers that answer without a body, on WebFlux ({@code FluxNoBodyController}): each shape is
 * stored once and replayed with its status and headers, and a repeat never runs the handler again.
 * Run on every WebFlux store by {@link WebFluxEndpointContract}.
 */
interface NoBodyCases extends EndpointClient {

  @ParameterizedTest(name = "{0}")
  @CsvSource({
    "/accepted/mono-void, 202, false",
    "/accepted/void, 202, false",
    "/accepted/entity, 202, true",
    "/accepted/empty, 202, false",
    "/accepted/response-parameter, 202, true",
    "/accepted/no-content, 204, false"
  })
  default void aResponseWithoutABodyIsStoredAndReplayedAndTheHandlerRunsOnce(
      String path, int status, boolean withHeaders) throws Exception {
    String key = newKey();

    HttpResponse<byte[]> first = post(path, key, "{\"to\":\"a\"}");
    HttpResponse<byte[]> repeat = post(path, key, "{\"to\":\"a\"}");
    HttpResponse<byte[]> again = post(path, key, "{\"to\":\"a\"}");

    assertThat(first.statusCode()).isEqualTo(status);
    assertThat(first.body()).isEmpty();
    assertThat(header(first, "Idempotent-Replayed")).isNull();
    assertThat(runs()).as("one send for one key: a repeat did not run the handler").isEqualTo(1);
    for (HttpResponse<byte[]> replay : java.util.List.of(repeat, again)) {
      assertThat(replay.statusCode()).isEqualTo(status);
      assertThat(replay.body()).isEmpty();
      assertThat(header(replay, "Idempotent-Replayed")).isEqualTo("true");
      assertThat(header(replay, "Location")).isEqualTo(header(first, "Location"));
      assertThat(header(replay, "X-Notification-Id")).isEqualTo(header(first, "X-Notification-Id"));
    }
    if (withHeaders) {
      assertThat(header(first, "Location")).startsWith("/notifications/n_");
      assertThat(header(first, "X-Notification-Id")).startsWith("n_");
    }
  }
}
