package dev.idempotency.examples.http;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spi.KeyStore;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The HTTP example end to end over real HTTP, on the store a subclass provides. */
abstract class NotifyServerContract {

  static final String SMS_BODY =
      "{\"channel\":\"sms\",\"recipient\":\"+15550100042\",\"template\":\"otp\",\"params\":{\"code\":\"482913\"}}";

  final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();
  NotifyServer server;

  abstract KeyStore store();

  NotifyServer server(Duration inFlightWait) throws Exception {
    if (server == null) {
      server = new NotifyServer(0, store(), inFlightWait);
    }
    return server;
  }

  @AfterEach
  void stopServer() {
    if (server != null) {
      server.close();
    }
  }

  HttpResponse<String> post(String key, String body) throws Exception {
    HttpRequest.Builder request =
        HttpRequest.newBuilder(
                URI.create("http://127.0.0.1:" + server(Duration.ofSeconds(2)).port() + "/notify"))
            .timeout(Duration.ofSeconds(60))
            .POST(HttpRequest.BodyPublishers.ofString(body));
    if (key != null) {
      request.header("Idempotency-Key", key);
    }
    return http.send(request.build(), HttpResponse.BodyHandlers.ofString());
  }

  static String newKey() {
    return "\"" + UUID.randomUUID() + "\"";
  }

  @Test
  void firstRequestSendsAndRepeatReplaysWithoutASecondSend() throws Exception {
    String key = newKey();

    HttpResponse<String> first = post(key, SMS_BODY);
    HttpResponse<String> repeat = post(key, SMS_BODY);

    assertThat(first.statusCode()).isEqualTo(200);
    assertThat(first.body()).isEqualTo("{\"notification_id\":\"n_801\",\"channel\":\"sms\"}");
    assertThat(first.headers().firstValue("Idempotent-Replayed")).isEmpty();
    assertThat(repeat.statusCode()).isEqualTo(200);
    assertThat(repeat.body()).isEqualTo(first.body());
    assertThat(repeat.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(server.sms.accepted()).hasSize(1);
  }

  @Test
  void sameBodyWithOtherKeyOrderIsTheSameRequest() throws Exception {
    String key = newKey();
    post(key, SMS_BODY);

    HttpResponse<String> reordered =
        post(
            key,
            "{ \"params\": {\"code\": \"482913\"}, \"template\": \"otp\", \"recipient\": \"+15550100042\", \"channel\": \"sms\" }");

    assertThat(reordered.statusCode()).isEqualTo(200);
    assertThat(reordered.headers().firstValue("Idempotent-Replayed")).hasValue("true");
  }

  @Test
  void providerGetsTheProviderKeyAndPushGetsAUuid() throws Exception {
    post(newKey(), SMS_BODY);
    HttpResponse<String> push =
        post(newKey(), "{\"channel\":\"push\",\"recipient\":\"device-1\",\"template\":\"otp\"}");

    assertThat(server.sms.accepted().get(0).idempotencyKey()).matches("[A-Za-z0-9_-]{43}");
    assertThat(push.statusCode()).isEqualTo(200);
    assertThat(UUID.fromString(server.push.accepted().get(0).idempotencyKey()).version())
        .isEqualTo(5);
  }

  @Test
  void sameKeyWithADifferentBodyIs422() throws Exception {
    String key = newKey();
    post(key, SMS_BODY);

    HttpResponse<String> other = post(key, SMS_BODY.replace("482913", "111111"));

    assertThat(other.statusCode()).isEqualTo(422);
    assertThat(other.headers().firstValue("Content-Type")).hasValue("application/problem+json");
    assertThat(other.body()).contains("\"status\":422").contains("different request body");
    assertThat(server.sms.accepted()).hasSize(1);
  }

  @Test
  void missingOrMalformedKeyIs400AndSendsNothing() throws Exception {
    for (String key : new String[] {null, "\"unterminated", "\"\"", "two words"}) {
      HttpResponse<String> response = post(key, SMS_BODY);
      assertThat(response.statusCode()).as(String.valueOf(key)).isEqualTo(400);
      assertThat(response.headers().firstValue("Content-Type"))
          .hasValue("application/problem+json");
    }
    assertThat(post(newKey(), "{\"channel\":\"fax\"}").statusCode()).isEqualTo(400);
    assertThat(post(newKey(), "not json").statusCode()).isEqualTo(400);
    assertThat(server.sms.requests()).isZero();
  }

  @Test
  void bareTokenKeyIsAccepted() throws Exception {
    assertThat(post(UUID.randomUUID().toString(), SMS_BODY).statusCode()).isEqualTo(200);
  }

  @Test
  void repeatWhileTheFirstIsStillSendingIs409WithRetryAfter() throws Exception {
    server(Duration.ofMillis(200));
    CountDownLatch provider = new CountDownLatch(1);
    server.sms.holdUntil(provider);
    String key = newKey();
    CompletableFuture<HttpResponse<String>> first = CompletableFuture.supplyAsync(() -> call(key));
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (server.sms.requests() == 0 && System.nanoTime() < deadline) {
      Thread.sleep(5);
    }

    HttpResponse<String> repeat = post(key, SMS_BODY);
    provider.countDown();

    assertThat(repeat.statusCode()).isEqualTo(409);
    assertThat(repeat.headers().firstValue("Retry-After")).hasValue("1");
    assertThat(first.get(60, TimeUnit.SECONDS).statusCode()).isEqualTo(200);
    assertThat(server.sms.accepted()).hasSize(1);
  }

  @Test
  void concurrentRepeatsOfOneKeyGiveOneSendAndOneAnswer() throws Exception {
    server(Duration.ofSeconds(30));
    String key = newKey();
    List<CompletableFuture<HttpResponse<String>>> responses = new ArrayList<>();
    for (int i = 0; i < 16; i++) {
      responses.add(CompletableFuture.supplyAsync(() -> call(key)));
    }

    List<String> bodies = new ArrayList<>();
    for (CompletableFuture<HttpResponse<String>> response : responses) {
      HttpResponse<String> r = response.get(60, TimeUnit.SECONDS);
      assertThat(r.statusCode()).isEqualTo(200);
      bodies.add(r.body());
    }

    assertThat(bodies).hasSize(16).containsOnly(bodies.get(0));
    assertThat(server.sms.accepted()).hasSize(1);
  }

  @Test
  void providerFailureIs502AndARetrySends() throws Exception {
    String key = newKey();
    server(Duration.ofSeconds(2)).sms.failNext(1);

    HttpResponse<String> failed = post(key, SMS_BODY);
    HttpResponse<String> retry = post(key, SMS_BODY);

    assertThat(failed.statusCode()).isEqualTo(502);
    assertThat(retry.statusCode()).isEqualTo(200);
    assertThat(retry.headers().firstValue("Idempotent-Replayed")).isEmpty();
    assertThat(server.sms.accepted()).hasSize(1);
  }

  private HttpResponse<String> call(String key) {
    try {
      return post(key, SMS_BODY);
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }
}
