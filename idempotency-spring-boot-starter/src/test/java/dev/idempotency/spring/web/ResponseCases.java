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
 * What is stored and what is released, on the paths a Spring application's responses take:
 * redirects, error pages written through sendError, refusals before the handler ran, "try again"
 * statuses, and a body larger than the capture bound. Run on every store by {@link
 * EndpointContract}.
 */
interface ResponseCases extends EndpointClient {

  String ORDER = "{\"sku\":\"book-42\",\"quantity\":1}";

  @Test
  default void aRedirectIsAFinalAnswerStoredAndReplayedNotRunAgain() throws Exception {
    String key = newKey();

    HttpResponse<byte[]> first = post("/orders", key, ORDER);
    HttpResponse<byte[]> repeat = post("/orders", key, ORDER);

    assertThat(first.statusCode()).isEqualTo(302);
    assertThat(header(first, "Location")).contains("/orders/o_");
    assertThat(repeat.statusCode()).isEqualTo(302);
    assertThat(header(repeat, "Location")).isEqualTo(header(first, "Location"));
    assertThat(header(repeat, "Idempotent-Replayed")).isEqualTo("true");
    assertThat(runs()).as("a retry of POST-redirect-GET places no second order").isEqualTo(1);
  }

  @Test
  default void aSeeOtherWithLocationIsStoredAndReplayed() throws Exception {
    String key = newKey();

    HttpResponse<byte[]> first = post("/orders/see-other", key, ORDER);
    HttpResponse<byte[]> repeat = post("/orders/see-other", key, ORDER);

    assertThat(first.statusCode()).isEqualTo(303);
    assertThat(repeat.statusCode()).isEqualTo(303);
    assertThat(header(repeat, "Location")).isEqualTo(header(first, "Location")).isNotNull();
    assertThat(header(repeat, "Idempotent-Replayed")).isEqualTo("true");
    assertThat(runs()).isEqualTo(1);
  }

  @Test
  default void aResponseStatusExceptionIsStoredWithTheErrorBodyTheClientGot() throws Exception {
    String key = newKey();

    HttpResponse<byte[]> first = post("/orders/o_7/cancel", key, "");
    HttpResponse<byte[]> repeat = post("/orders/o_7/cancel", key, "");

    assertThat(first.statusCode()).isEqualTo(404);
    assertThat(header(first, "Content-Type")).startsWith("application/json");
    assertThat(text(first)).contains("no order o_7 (run ");
    assertThat(repeat.statusCode()).isEqualTo(404);
    assertThat(repeat.body()).as("the error page, byte for byte").isEqualTo(first.body());
    assertThat(header(repeat, "Content-Type")).isEqualTo(header(first, "Content-Type"));
    assertThat(header(repeat, "Idempotent-Replayed")).isEqualTo("true");
    assertThat(runs()).isEqualTo(1);
  }

  @Test
  default void anExceptionWithResponseStatusIsStoredWithItsErrorBody() throws Exception {
    String key = newKey();

    HttpResponse<byte[]> first = post("/coupons/SPRING25/redeem", key, "");
    HttpResponse<byte[]> repeat = post("/coupons/SPRING25/redeem", key, "");

    assertThat(first.statusCode()).isEqualTo(410);
    assertThat(text(first)).contains("the coupon has expired");
    assertThat(repeat.statusCode()).isEqualTo(410);
    assertThat(repeat.body()).isEqualTo(first.body());
    assertThat(header(repeat, "Content-Type")).isEqualTo(header(first, "Content-Type")).isNotNull();
    assertThat(runs()).isEqualTo(1);
  }

  @Test
  default void sendErrorOfTheHandlerIsStoredWithTheErrorPage() throws Exception {
    String key = newKey();

    HttpResponse<byte[]> first = post("/invoices/i_9/pay", key, "");
    HttpResponse<byte[]> repeat = post("/invoices/i_9/pay", key, "");

    assertThat(first.statusCode()).isEqualTo(402);
    assertThat(text(first)).contains("pay invoice i_9 first (run ");
    assertThat(repeat.statusCode()).isEqualTo(402);
    assertThat(repeat.body()).isEqualTo(first.body());
    assertThat(header(repeat, "Content-Type")).isEqualTo(header(first, "Content-Type")).isNotNull();
    assertThat(runs()).isEqualTo(1);
  }

  @Test
  default void anExceptionThatTheApplicationsAdviceMapsToA4xxIsStoredAndReplayed()
      throws Exception {
    String key = newKey();

    HttpResponse<byte[]> first = post("/messages/over-quota", key, "");
    HttpResponse<byte[]> repeat = post("/messages/over-quota", key, "");

    assertThat(first.statusCode()).isEqualTo(403);
    assertThat(text(first)).contains("monthly quota used (run ");
    assertThat(repeat.statusCode()).isEqualTo(403);
    assertThat(repeat.body()).isEqualTo(first.body());
    assertThat(header(repeat, "Content-Type")).isEqualTo(header(first, "Content-Type")).isNotNull();
    assertThat(header(repeat, "Idempotent-Replayed")).isEqualTo("true");
    assertThat(runs()).isEqualTo(1);
  }

  @Test
  default void anExceptionThatTheApplicationsAdviceMapsToA5xxReleasesTheKey() throws Exception {
    String key = newKey();

    HttpResponse<byte[]> first = post("/messages/provider-outage", key, "");
    HttpResponse<byte[]> retry = post("/messages/provider-outage", key, "");

    assertThat(first.statusCode()).isEqualTo(503);
    assertThat(retry.statusCode()).isEqualTo(503);
    assertThat(text(retry)).contains("provider unreachable (run ");
    assertThat(header(retry, "Idempotent-Replayed")).isNull();
    assertThat(runs()).as("the retry ran the handler again").isEqualTo(2);
  }

  @Test
  default void aMalformedBodyRefusedBeforeTheHandlerIsNotStored() throws Exception {
    String key = newKey();
    String fixed = "{\"email\":\"ada@example.com\"}";

    HttpResponse<byte[]> malformed = post("/signups", key, "{\"email\": ");
    HttpResponse<byte[]> corrected = post("/signups", key, fixed);
    HttpResponse<byte[]> repeat = post("/signups", key, fixed);

    assertThat(malformed.statusCode()).isEqualTo(400);
    assertThat(corrected.statusCode())
        .as("the client fixed its body under the same key: it runs, it is not a 422")
        .isEqualTo(201);
    assertThat(header(corrected, "Idempotent-Replayed")).isNull();
    assertThat(repeat.statusCode()).isEqualTo(201);
    assertThat(header(repeat, "Idempotent-Replayed")).isEqualTo("true");
    assertThat(runs()).isEqualTo(1);
  }

  @Test
  default void aValidationFailureBeforeTheHandlerIsNotStored() throws Exception {
    String key = newKey();
    String fixed = "{\"email\":\"grace@example.com\"}";

    HttpResponse<byte[]> invalid = post("/signups", key, "{\"email\":\" \"}");
    HttpResponse<byte[]> corrected = post("/signups", key, fixed);

    assertThat(invalid.statusCode()).isEqualTo(400);
    assertThat(corrected.statusCode()).isEqualTo(201);
    assertThat(text(corrected)).contains("grace@example.com");
    assertThat(runs()).isEqualTo(1);
  }

  @Test
  default void aHandlerThatSentAndThenFailsWithAnInputErrorIsStoredNotRunAgain() throws Exception {
    String key = newKey();

    HttpResponse<byte[]> first = post("/orders/sent-then-refused", key, ORDER);
    HttpResponse<byte[]> repeat = post("/orders/sent-then-refused", key, ORDER);

    assertThat(first.statusCode()).isEqualTo(400);
    assertThat(text(first)).contains("the provider rejected the phone number (run ");
    assertThat(repeat.statusCode()).isEqualTo(400);
    assertThat(repeat.body()).isEqualTo(first.body());
    assertThat(header(repeat, "Idempotent-Replayed")).isEqualTo("true");
    assertThat(runs()).as("the handler ran (and sent) once: its 400 is final").isEqualTo(1);
  }

  @Test
  default void aRefusalThatTheApplicationAnswersItselfIsNotStored() throws Exception {
    String key = newKey();
    String fixed = "{\"email\":\"lin@example.com\"}";

    HttpResponse<byte[]> invalid = post("/signups/answered", key, "{\"email\":\" \"}");
    HttpResponse<byte[]> corrected = post("/signups/answered", key, fixed);
    HttpResponse<byte[]> repeat = post("/signups/answered", key, fixed);

    assertThat(invalid.statusCode()).as("the application's own answer").isEqualTo(422);
    assertThat(text(invalid)).contains("invalid sign-up");
    assertThat(corrected.statusCode())
        .as("the handler never ran: the corrected request runs, it is not a 422 replay")
        .isEqualTo(201);
    assertThat(header(corrected, "Idempotent-Replayed")).isNull();
    assertThat(repeat.statusCode()).isEqualTo(201);
    assertThat(header(repeat, "Idempotent-Replayed")).isEqualTo("true");
    assertThat(runs()).isEqualTo(1);
  }

  @ParameterizedTest
  @ValueSource(ints = {408, 409, 425, 429})
  default void aTryAgainStatusReleasesTheKey(int status) throws Exception {
    String key = newKey();

    HttpResponse<byte[]> first = post("/statuses/" + status, key, "");
    HttpResponse<byte[]> retry = post("/statuses/" + status, key, "");

    assertThat(first.statusCode()).isEqualTo(status);
    assertThat(retry.statusCode()).isEqualTo(status);
    assertThat(header(retry, "Idempotent-Replayed")).isNull();
    assertThat(runs()).as("the retry ran the handler again").isEqualTo(2);
  }

  @ParameterizedTest
  @ValueSource(ints = {400, 403, 404, 422})
  default void anyOtherHandler4xxIsStored(int status) throws Exception {
    String key = newKey();

    HttpResponse<byte[]> first = post("/statuses/" + status, key, "");
    HttpResponse<byte[]> repeat = post("/statuses/" + status, key, "");

    assertThat(repeat.statusCode()).isEqualTo(status);
    assertThat(repeat.body()).isEqualTo(first.body());
    assertThat(header(repeat, "Idempotent-Replayed")).isEqualTo("true");
    assertThat(runs()).isEqualTo(1);
  }

  @Test
  default void aResponseOverTheBoundReachesTheClientAndARepeatGetsAFinalAnswer() throws Exception {
    String key = newKey();
    int size = 20_000; // the tests' bound is 8 KB

    HttpResponse<byte[]> first = post("/reports?bytes=" + size, key, "");
    HttpResponse<byte[]> repeat = post("/reports?bytes=" + size, key, "");
    HttpResponse<byte[]> again = post("/reports?bytes=" + size, key, "");

    assertThat(first.statusCode()).isEqualTo(200);
    assertThat(first.body()).as("the first client gets all of it").hasSize(size);
    assertThat(repeat.statusCode()).as("not a 5xx: nothing invites a retry").isEqualTo(422);
    assertThat(header(repeat, "Retry-After")).isNull();
    assertThat(header(repeat, "Content-Type")).isEqualTo("application/problem+json");
    assertThat(text(repeat))
        .contains("/problems/response-not-stored")
        .contains("\"original-status\":200");
    assertThat(again.statusCode()).isEqualTo(422);
    assertThat(runs()).as("the handler ran once").isEqualTo(1);
  }

  @Test
  default void aResponseWithinTheBoundIsStoredWhole() throws Exception {
    String key = newKey();

    HttpResponse<byte[]> first = post("/reports?bytes=8000", key, "");
    HttpResponse<byte[]> repeat = post("/reports?bytes=8000", key, "");

    assertThat(first.body()).hasSize(8000);
    assertThat(repeat.body()).isEqualTo(first.body());
    assertThat(header(repeat, "Idempotent-Replayed")).isEqualTo("true");
    assertThat(runs()).isEqualTo(1);
  }
}
