package dev.idempotency.spring.web;

import static dev.idempotency.spring.web.EndpointClient.header;
import static dev.idempotency.spring.web.EndpointClient.newKey;
import static dev.idempotency.spring.web.EndpointClient.text;
import static org.assertj.core.api.Assertions.assertThat;

import java.net.http.HttpResponse;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Async handlers ({@code Callable}, {@code DeferredResult}, {@code CompletableFuture}, {@code
 * WebAsyncTask}) are guarded as synchronous ones: the response is stored when the async result has
 * been written. Run on every store by {@link EndpointContract}.
 */
interface AsyncCases extends EndpointClient {

  @ParameterizedTest
  @ValueSource(strings = {"callable", "deferred", "future", "task"})
  default void anAsyncHandlerRunsOnceAndItsResponseIsReplayed(String kind) throws Exception {
    String key = newKey();

    HttpResponse<byte[]> first = post("/async/" + kind, key, "{}");
    HttpResponse<byte[]> repeat = post("/async/" + kind, key, "{}");

    assertThat(first.statusCode()).as(text(first)).isEqualTo(201);
    assertThat(text(first)).contains("\"id\":\"" + kind + "_");
    assertThat(header(first, "Idempotent-Replayed")).isNull();
    assertThat(repeat.statusCode()).isEqualTo(201);
    assertThat(repeat.body()).isEqualTo(first.body());
    assertThat(header(repeat, "Location")).isEqualTo(header(first, "Location")).isNotNull();
    assertThat(header(repeat, "Idempotent-Replayed")).isEqualTo("true");
    assertThat(runs()).isEqualTo(1);
  }

  @Test
  default void anAsyncResultThatFailsReleasesTheKey() throws Exception {
    String key = newKey();

    HttpResponse<byte[]> first = post("/async/failing", key, "{}");
    HttpResponse<byte[]> retry = post("/async/failing", key, "{}");

    assertThat(first.statusCode()).isEqualTo(500);
    assertThat(retry.statusCode()).isEqualTo(500);
    assertThat(header(retry, "Idempotent-Replayed")).isNull();
    assertThat(runs()).as("the retry ran the handler again").isEqualTo(2);
  }
}
