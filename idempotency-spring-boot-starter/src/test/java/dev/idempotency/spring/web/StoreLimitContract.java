package dev.idempotency.spring.web;

import static dev.idempotency.spring.web.EndpointClient.header;
import static dev.idempotency.spring.web.EndpointClient.newKey;
import static dev.idempotency.spring.web.EndpointClient.text;
import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.app.NotifyTestApplication;
import java.net.http.HttpResponse;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.SpringBootTest;

/**
 * A response within the capture bound but larger than the store accepts: the store records the
 * request as answered without its response, and a repeat gets the same final answer as for an
 * oversized response ({@code 422}, {@code /problems/response-not-stored}), not a {@code 500} for
 * the whole window. Each subclass gives the application a store of its kind with a 4 KB limit.
 */
@SpringBootTest(
    classes = NotifyTestApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
    properties = "idempotency.http.max-response-size=64KB")
abstract class StoreLimitContract extends RunningApplication {

  /** The store's limit in the subclasses' stores. */
  static final int STORE_LIMIT = 4096;

  @Test
  void aRepeatOfAResponseTheStoreCouldNotKeepGetsAFinalAnswerNotA500() throws Exception {
    String key = newKey();

    HttpResponse<byte[]> first = post("/reports?bytes=10000", key, "");
    HttpResponse<byte[]> repeat = post("/reports?bytes=10000", key, "");

    assertThat(first.statusCode()).isEqualTo(200);
    assertThat(first.body()).hasSize(10_000);
    assertThat(repeat.statusCode()).isEqualTo(422);
    assertThat(header(repeat, "Retry-After")).isNull();
    assertThat(text(repeat)).contains("/problems/response-not-stored");
    assertThat(runs()).isEqualTo(1);
  }

  @Test
  void aResponseWithinTheStoresLimitIsReplayed() throws Exception {
    String key = newKey();

    HttpResponse<byte[]> first = post("/reports?bytes=2000", key, "");
    HttpResponse<byte[]> repeat = post("/reports?bytes=2000", key, "");

    assertThat(repeat.body()).isEqualTo(first.body());
    assertThat(header(repeat, "Idempotent-Replayed")).isEqualTo("true");
    assertThat(runs()).isEqualTo(1);
  }
}
