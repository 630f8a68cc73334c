package dev.idempotency.spring.web;

import static dev.idempotency.spring.web.EndpointClient.header;
import static dev.idempotency.spring.web.EndpointClient.newKey;
import static dev.idempotency.spring.web.EndpointClient.text;
import static org.assertj.core.api.Assertions.assertThat;

import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * SPEC section 13's statuses and replays: replay byte for byte, 400, 409, 413, 422, 4xx stored, 5xx
 * and exceptions released, scope per endpoint and per user, sixteen concurrent repeats. Run on
 * every store by the Spring MVC {@link EndpointContract} and the WebFlux {@link
 * WebFluxEndpointContract}, whose applications answer the same paths the same way.
 */
interface StatusCases extends EndpointClient {

  String BODY = "{\"channel\":\"sms\",\"recipient\":\"+15550100042\",\"n\":100}";

  /** Makes the next handler runs of {@code /notify} wait for the latch; null to run at once. */
  void holdHandlers(CountDownLatch latch);

  /** Waits (bounded) until a handler run of {@code /notify} is held. */
  boolean awaitAHeldHandler() throws InterruptedException;

  @BeforeEach
  default void runHandlersAtOnceFirst() {
    holdHandlers(null);
  }

  @AfterEach
  default void runHandlersAtOnce() {
    holdHandlers(null);
  }

  @Test
  default void aRepeatGetsTheFirstResponseByteForByteWithoutRunningTheHandler() throws Exception {
    String key = newKey();

    HttpResponse<byte[]> first = post("/notify", key, BODY);
    HttpResponse<byte[]> repeat = post("/notify", key, BODY);

    assertThat(first.statusCode()).isEqualTo(201);
    assertThat(header(first, "Idempotent-Replayed")).isNull();
    assertThat(repeat.statusCode()).isEqualTo(201);
    assertThat(repeat.body()).isEqualTo(first.body());
    assertThat(header(repeat, "Idempotent-Replayed")).isEqualTo("true");
    assertThat(header(repeat, "Content-Type")).isEqualTo(header(first, "Content-Type"));
    assertThat(header(repeat, "Location")).isEqualTo(header(first, "Location")).isNotNull();
    assertThat(header(repeat, "X-Notification-Id"))
        .as("a header the endpoint lists")
        .isEqualTo(header(first, "X-Notification-Id"))
        .isNotNull();
    assertThat(header(repeat, "X-Not-Listed")).as("a header it does not list").isNull();
    assertThat(header(first, "X-Provider-Key"))
        .as("the handler got the SendContext: the provider key for the second layer")
        .matches("[A-Za-z0-9_-]{43}");
    assertThat(runs()).isEqualTo(1);
  }

  @Test
  default void theSameJsonWithOtherKeyOrderAndNumberSpellingIsTheSameRequest() throws Exception {
    String key = newKey();
    post("/notify", key, BODY);

    HttpResponse<byte[]> reordered =
        post(
            "/notify",
            key,
            "{ \"n\": 1e2, \"recipient\": \"+15550100042\", \"channel\": \"sms\" }");

    assertThat(reordered.statusCode()).isEqualTo(201);
    assertThat(header(reordered, "Idempotent-Replayed")).isEqualTo("true");
    assertThat(runs()).isEqualTo(1);
  }

  @Test
  default void theSameKeyWithAnotherBodyIs422AndRunsNothing() throws Exception {
    String key = newKey();
    post("/notify", key, BODY);

    HttpResponse<byte[]> other = post("/notify", key, BODY.replace("+15550100042", "+1555"));

    assertThat(other.statusCode()).isEqualTo(422);
    assertThat(header(other, "Content-Type")).isEqualTo("application/problem+json");
    assertThat(text(other)).contains("\"status\":422").contains("/problems/key-reused");
    assertThat(runs()).isEqualTo(1);
  }

  @Test
  default void aMissingOrMalformedKeyIs400AndRunsNothing() throws Exception {
    HttpResponse<byte[]> missing = post("/notify", null, BODY);
    HttpResponse<byte[]> malformed = post("/notify", "\"unterminated", BODY);

    assertThat(missing.statusCode()).isEqualTo(400);
    assertThat(header(missing, "Content-Type")).isEqualTo("application/problem+json");
    assertThat(text(missing)).contains("Idempotency-Key header is required");
    assertThat(malformed.statusCode()).isEqualTo(400);
    assertThat(text(malformed)).contains("unterminated string");
    assertThat(runs()).isZero();
  }

  @Test
  default void anEndpointThatDoesNotRequireTheKeyRunsEveryTimeWithoutIt() throws Exception {
    post("/orders/o-1/receipt", null, "");
    post("/orders/o-1/receipt", null, "");

    assertThat(runs()).isEqualTo(2);
  }

  @Test
  default void keysAreScopedToTheEndpointAndTheRequestIsItsPathToo() throws Exception {
    String key = newKey();

    HttpResponse<byte[]> notify = post("/notify", key, BODY);
    HttpResponse<byte[]> receipt = post("/orders/o-1/receipt", key, "");
    HttpResponse<byte[]> otherOrder = post("/orders/o-2/receipt", key, "");

    assertThat(notify.statusCode()).isEqualTo(201);
    assertThat(receipt.statusCode()).as("another endpoint: another record").isEqualTo(200);
    assertThat(otherOrder.statusCode()).as("same endpoint, another request").isEqualTo(422);
    assertThat(runs()).isEqualTo(2);
  }

  @Test
  default void twoUsersWithTheSameKeyNeverShareARecord() throws Exception {
    String key = newKey();

    HttpResponse<byte[]> alice = post("/notify", key, BODY, "X-User", "alice");
    HttpResponse<byte[]> bob = post("/notify", key, BODY, "X-User", "bob");

    assertThat(header(bob, "Idempotent-Replayed")).isNull();
    assertThat(bob.body()).isNotEqualTo(alice.body());
    assertThat(runs()).isEqualTo(2);
  }

  @Test
  default void a4xxOfTheHandlerIsStoredAndReplayed() throws Exception {
    String key = newKey();
    String invalid = BODY.replace("+15550100042", "invalid");

    HttpResponse<byte[]> first = post("/notify", key, invalid);
    HttpResponse<byte[]> repeat = post("/notify", key, invalid);

    assertThat(first.statusCode()).isEqualTo(400);
    assertThat(repeat.statusCode()).isEqualTo(400);
    assertThat(repeat.body()).isEqualTo(first.body());
    assertThat(header(repeat, "Idempotent-Replayed")).isEqualTo("true");
    assertThat(runs()).isEqualTo(1);
  }

  @Test
  default void a5xxOfTheHandlerReleasesTheKey() throws Exception {
    String key = newKey();
    String failing = BODY.replace("+15550100042", "provider-down");

    HttpResponse<byte[]> first = post("/notify", key, failing);
    HttpResponse<byte[]> retry = post("/notify", key, failing);

    assertThat(first.statusCode()).isEqualTo(502);
    assertThat(retry.statusCode()).isEqualTo(502);
    assertThat(header(retry, "Idempotent-Replayed")).isNull();
    assertThat(runs()).as("the retry ran the handler again").isEqualTo(2);
  }

  @Test
  default void anExceptionOfTheHandlerReleasesTheKey() throws Exception {
    String key = newKey();
    String exploding = BODY.replace("+15550100042", "explode");

    HttpResponse<byte[]> first = post("/notify", key, exploding);
    HttpResponse<byte[]> retry = post("/notify", key, exploding);

    assertThat(first.statusCode()).isEqualTo(500);
    assertThat(retry.statusCode()).isEqualTo(500);
    assertThat(runs()).isEqualTo(2);
  }

  @Test
  default void aBodyOverTheLimitIs413AndRunsNothing() throws Exception {
    String big = "{\"channel\":\"sms\",\"pad\":\"" + "x".repeat(5_000) + "\"}";

    HttpResponse<byte[]> response = post("/notify", newKey(), big);

    assertThat(response.statusCode()).isEqualTo(413);
    assertThat(header(response, "Content-Type")).isEqualTo("application/problem+json");
    assertThat(runs()).isZero();
  }

  @Test
  default void aRepeatWhileTheFirstIsRunningIs409WithRetryAfterThenAReplay() throws Exception {
    String key = newKey();
    CountDownLatch slowProvider = new CountDownLatch(1);
    holdHandlers(slowProvider);
    CompletableFuture<HttpResponse<byte[]>> first =
        CompletableFuture.supplyAsync(
            () -> {
              try {
                return post("/notify", key, BODY);
              } catch (Exception e) {
                throw new IllegalStateException(e);
              }
            });
    assertThat(awaitAHeldHandler()).as("the first request is in the handler").isTrue();
    HttpResponse<byte[]> repeat = post("/notify", key, BODY);
    slowProvider.countDown();
    HttpResponse<byte[]> firstResponse = first.get(60, TimeUnit.SECONDS);
    HttpResponse<byte[]> later = post("/notify", key, BODY);

    assertThat(repeat.statusCode()).isEqualTo(409);
    assertThat(header(repeat, "Retry-After")).isEqualTo("1");
    assertThat(header(repeat, "Content-Type")).isEqualTo("application/problem+json");
    assertThat(firstResponse.statusCode()).isEqualTo(201);
    assertThat(later.body()).isEqualTo(firstResponse.body());
    assertThat(runs()).isEqualTo(1);
  }

  @Test
  default void sixteenConcurrentRequestsWithOneKeyRunTheHandlerOnce() throws Exception {
    String key = newKey();
    CountDownLatch start = new CountDownLatch(1);
    List<CompletableFuture<HttpResponse<byte[]>>> requests = new ArrayList<>();
    for (int i = 0; i < 16; i++) {
      requests.add(
          CompletableFuture.supplyAsync(
              () -> {
                try {
                  start.await();
                  return post("/notify", key, BODY);
                } catch (Exception e) {
                  throw new IllegalStateException(e);
                }
              },
              java.util.concurrent.Executors.newSingleThreadExecutor()));
    }
    start.countDown();
    List<HttpResponse<byte[]>> responses = new ArrayList<>();
    for (CompletableFuture<HttpResponse<byte[]>> request : requests) {
      responses.add(request.get(60, TimeUnit.SECONDS));
    }

    assertThat(runs()).isEqualTo(1);
    assertThat(responses)
        .allSatisfy(
            response -> assertThat(response.statusCode()).as(text(response)).isIn(201, 409));
    List<HttpResponse<byte[]>> firsts =
        responses.stream()
            .filter(r -> r.statusCode() == 201 && header(r, "Idempotent-Replayed") == null)
            .toList();
    assertThat(firsts).hasSize(1);
    assertThat(responses)
        .filteredOn(r -> r.statusCode() == 201)
        .allSatisfy(r -> assertThat(r.body()).isEqualTo(firsts.get(0).body()));
  }
}
