package dev.idempotency.spring.reactive;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.BoundedExchange;
import dev.idempotency.spring.web.IdempotentEndpointWebFilter;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.context.ApplicationContext;
import org.springframework.context.annotation.Import;

/**
 * {@code @IdempotentEndpoint} in a real Spring WebFlux application on Reactor Netty, over real
 * HTTP, with BlockHound failing any blocking call of the SDK on an event loop or a {@code parallel}
 * thread.
 */
@SpringBootTest(
    classes = ReactiveTestApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
    properties = {"spring.main.web-application-type=reactive", "idempotency.store=memory"})
@Import(NettyServer.class)
class WebFluxEndpointTest {

  private static final HttpClient CLIENT =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

  @LocalServerPort int port;
  @Autowired ReactiveNotifyController controller;
  @Autowired ReactiveMailer mailer;
  @Autowired ApplicationContext context;

  @BeforeAll
  static void blockHound() {
    BlockingCalls.install();
  }

  @AfterEach
  void nothingBlockedANonBlockingThread() {
    BlockingCalls.assertNoneFromTheSdk();
  }

  private HttpResponse<String> post(String path, String key, String body) throws Exception {
    return BoundedExchange.send(
        CLIENT, request(path, key, body), HttpResponse.BodyHandlers.ofString());
  }

  private HttpRequest request(String path, String key, String body) {
    HttpRequest.Builder builder =
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
            .timeout(Duration.ofSeconds(20))
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body));
    if (key != null) {
      builder.header("Idempotency-Key", key);
    }
    return builder.build();
  }

  private static String key() {
    return UUID.randomUUID().toString();
  }

  @Test
  void aReactiveApplicationGetsTheWebFilterAndNoServletFilter() {
    assertThat(context.getBeansOfType(IdempotentEndpointWebFilter.class)).hasSize(1);
    assertThat(context.containsBean("idempotentEndpointFilter")).isFalse();
  }

  @Test
  void aRepeatIsReplayedByteForByteWithoutSendingAgainAndWithoutTheCookie() throws Exception {
    String key = key();
    int before = controller.sends();

    HttpResponse<String> first = post("/notify", key, "{\"to\":\"+4915\",\"text\":\"hi\"}");
    HttpResponse<String> repeat = post("/notify", key, "{ \"text\": \"hi\", \"to\": \"+4915\" }");

    assertThat(first.statusCode()).isEqualTo(201);
    assertThat(first.headers().firstValue("Idempotent-Replayed")).isEmpty();
    assertThat(repeat.statusCode()).isEqualTo(201);
    assertThat(repeat.body()).isEqualTo(first.body());
    assertThat(repeat.headers().firstValue("Location"))
        .isEqualTo(first.headers().firstValue("Location"));
    assertThat(repeat.headers().firstValue("Content-Type"))
        .isEqualTo(first.headers().firstValue("Content-Type"));
    assertThat(repeat.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(repeat.headers().firstValue("Set-Cookie")).isEmpty();
    assertThat(controller.sends() - before).isEqualTo(1);
  }

  @Test
  void theSameKeyWithAnotherBodyIs422AndSendsNothing() throws Exception {
    String key = key();
    post("/notify", key, "{\"to\":\"+4915\"}");
    int before = controller.sends();

    HttpResponse<String> other = post("/notify", key, "{\"to\":\"+4916\"}");

    assertThat(other.statusCode()).isEqualTo(422);
    assertThat(other.headers().firstValue("Content-Type")).hasValue("application/problem+json");
    assertThat(other.body()).contains("\"type\":\"/problems/key-reused\"");
    assertThat(controller.sends()).isEqualTo(before);
  }

  @Test
  void aMissingKeyIs400AndSendsNothing() throws Exception {
    int before = controller.sends();

    HttpResponse<String> response = post("/notify", null, "{\"to\":\"+4915\"}");

    assertThat(response.statusCode()).isEqualTo(400);
    assertThat(response.body()).contains("/problems/missing-key");
    assertThat(controller.sends()).isEqualTo(before);
  }

  @Test
  void aMalformedOrShortKeyIs400AndSendsNothing() throws Exception {
    int before = controller.sends();

    assertThat(post("/notify", "short", "{}").body()).contains("/problems/key-too-short");
    assertThat(post("/notify", "\"unterminated", "{}").statusCode()).isEqualTo(400);
    assertThat(controller.sends()).isEqualTo(before);
  }

  @Test
  void theApplicationServesOnReactorNetty() throws Exception {
    assertThat(context.getBean("nettyReactiveWebServerFactory").getClass().getSimpleName())
        .isEqualTo("NettyReactiveWebServerFactory");
  }

  @Test
  void sixteenConcurrentRequestsWithOneKeySendOnceAndTheOthersReplayOrGet409() throws Exception {
    String key = key();
    int before = controller.sends();
    List<CompletableFuture<HttpResponse<String>>> responses = new ArrayList<>();
    for (int i = 0; i < 16; i++) {
      responses.add(
          CLIENT.sendAsync(
              request("/notify", key, "{\"to\":\"+4915\"}"), HttpResponse.BodyHandlers.ofString()));
    }

    int created = 0;
    int replayed = 0;
    for (CompletableFuture<HttpResponse<String>> future : responses) {
      HttpResponse<String> response = future.get();
      if (response.statusCode() == 409) {
        assertThat(response.headers().firstValue("Retry-After")).isPresent();
        continue;
      }
      assertThat(response.statusCode()).isEqualTo(201);
      if (response.headers().firstValue("Idempotent-Replayed").isPresent()) {
        replayed++;
      } else {
        created++;
      }
    }

    assertThat(created).isEqualTo(1);
    assertThat(replayed).isPositive();
    assertThat(controller.sends() - before).isEqualTo(1);
  }

  @Test
  void a5xxReachesTheClientAndReleasesTheKeySoThatARetrySends() throws Exception {
    String key = key();
    int before = controller.sends();

    HttpResponse<String> down = post("/notify/flaky", key, "hello");
    HttpResponse<String> retried = post("/notify/flaky", key, "hello");
    HttpResponse<String> repeat = post("/notify/flaky", key, "hello");

    assertThat(down.statusCode()).isEqualTo(503);
    assertThat(down.body()).isEqualTo("provider down");
    assertThat(retried.statusCode()).isEqualTo(200);
    assertThat(repeat.body()).isEqualTo(retried.body());
    assertThat(repeat.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(controller.sends() - before).isEqualTo(2);
  }

  @Test
  void anIdempotentMethodsUnsafeKeyIsA400ProblemNotA500() throws Exception {
    int before = mailer.runs();

    HttpResponse<String> refused = post("/orders/" + "k".repeat(2_000) + "/mail", null, "");

    assertThat(refused.statusCode()).as(refused.body()).isEqualTo(400);
    assertThat(refused.headers().firstValue("Content-Type")).hasValue("application/problem+json");
    assertThat(refused.body()).contains("/problems/malformed-key");
    assertThat(mailer.runs()).as("nothing sent").isEqualTo(before);
  }

  @Test
  void anIdempotentMethodInProgressIsA409ProblemWithRetryAfter() throws Exception {
    String order = key();
    int before = mailer.runs();
    CompletableFuture<HttpResponse<String>> first =
        CLIENT.sendAsync(
            request("/orders/" + order + "/held", null, ""), HttpResponse.BodyHandlers.ofString());
    long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
    while (mailer.runs() == before) {
      assertThat(System.nanoTime()).as("the first send started within 30 s").isLessThan(deadline);
      Thread.sleep(10);
    }
    HttpResponse<String> repeat = post("/orders/" + order + "/held", null, "");
    mailer.answer(order, new ReactiveMailer.Sent("sent-held", order));

    assertThat(repeat.statusCode()).as(repeat.body()).isEqualTo(409);
    assertThat(repeat.headers().firstValue("Retry-After")).isPresent();
    assertThat(repeat.body()).contains("/problems/request-in-progress");
    assertThat(first.get().statusCode()).isEqualTo(200);
  }
}
