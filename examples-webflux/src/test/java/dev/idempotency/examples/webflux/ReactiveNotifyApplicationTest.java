package dev.idempotency.examples.webflux;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.data.redis.connection.RedisConnectionFactory;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import redis.embedded.RedisServer;

/** The WebFlux example over real HTTP on Reactor Netty, with a real Redis as its store. */
@SpringBootTest(
    classes = ReactiveNotifyApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
    properties = {"provider.delay=300ms", "spring.main.banner-mode=off"})
class ReactiveNotifyApplicationTest {

  private static RedisServer redis;
  private static final HttpClient HTTP =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

  @DynamicPropertySource
  static void redis(DynamicPropertyRegistry registry) throws IOException {
    int port;
    try (ServerSocket socket = new ServerSocket(0)) {
      port = socket.getLocalPort();
    }
    redis = RedisServer.builder().port(port).setting("bind 127.0.0.1").setting("save \"\"").build();
    redis.start();
    registry.add("spring.data.redis.url", () -> "redis://127.0.0.1:" + port);
  }

  @AfterAll
  static void stopRedis() throws IOException {
    redis.stop();
  }

  @LocalServerPort int port;
  @Autowired StandInSmsProvider provider;
  @Autowired RedisConnectionFactory redisConnections;

  private HttpResponse<String> notify(String key, String body) throws Exception {
    HttpRequest request =
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/notify"))
            .timeout(Duration.ofSeconds(30))
            .header("Content-Type", "application/json")
            .header("Idempotency-Key", key)
            .POST(HttpRequest.BodyPublishers.ofString(body))
            .build();
    return HTTP.send(request, HttpResponse.BodyHandlers.ofString());
  }

  /** A message to a recipient of the key's own, so that its sends can be counted. */
  private static String sms(String key, String text) {
    return "{\"recipient\":\"" + recipientOf(key) + "\",\"text\":\"" + text + "\"}";
  }

  private static String recipientOf(String key) {
    return "+1555-" + key;
  }

  private List<StandInSmsProvider.Received> sendsOf(String key) {
    return provider.received().stream().filter(r -> r.to().equals(recipientOf(key))).toList();
  }

  @Test
  void aRetryReplaysTheFirstAnswerFromRedisAndTheProviderGetsOneRequest() throws Exception {
    String key = "otp-" + UUID.randomUUID();

    HttpResponse<String> first = notify(key, sms(key, "Your code is 482913"));
    HttpResponse<String> retry = notify(key, sms(key, "Your code is 482913"));

    assertThat(first.statusCode()).isEqualTo(200);
    assertThat(first.body()).contains("\"notification_id\":\"sms_");
    assertThat(first.headers().firstValue("Idempotent-Replayed")).isEmpty();
    assertThat(retry.statusCode()).isEqualTo(200);
    assertThat(retry.body()).isEqualTo(first.body());
    assertThat(retry.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(sendsOf(key)).hasSize(1);
    // the provider gets the SDK's provider key, scoped as the SDK scopes the client's key
    assertThat(sendsOf(key).get(0).idempotencyKey()).isNotBlank().isNotEqualTo(key);
    // the record is in Redis, not in this JVM
    try (var connection = redisConnections.getConnection()) {
      assertThat(connection.serverCommands().dbSize()).isPositive();
    }
  }

  @Test
  void sixteenConcurrentRequestsWithOneKeySendOnce() throws Exception {
    String key = "otp-" + UUID.randomUUID();
    List<CompletableFuture<HttpResponse<String>>> requests = new ArrayList<>();
    for (int i = 0; i < 16; i++) {
      requests.add(CompletableFuture.supplyAsync(() -> call(key)));
    }

    List<Integer> statuses = new ArrayList<>();
    for (CompletableFuture<HttpResponse<String>> request : requests) {
      statuses.add(request.join().statusCode());
    }

    // each one either replays the first's answer or is told the first is still in flight
    assertThat(statuses).isSubsetOf(200, 409).contains(200);
    assertThat(sendsOf(key)).hasSize(1);
  }

  @Test
  void theSameKeyWithAnotherBodyIsRefusedAndNothingMoreIsSent() throws Exception {
    String key = "otp-" + UUID.randomUUID();
    notify(key, sms(key, "Your code is 482913"));

    HttpResponse<String> other = notify(key, sms(key, "Your code is 111111"));

    assertThat(other.statusCode()).isEqualTo(422);
    assertThat(other.headers().firstValue("Content-Type")).hasValue("application/problem+json");
    assertThat(sendsOf(key)).hasSize(1);
  }

  @Test
  void aRequestWithoutAKeyIsRefusedBeforeTheHandler() throws Exception {
    HttpRequest request =
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/notify"))
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(sms("none", "hi")))
            .build();
    int before = provider.received().size();

    HttpResponse<String> response = HTTP.send(request, HttpResponse.BodyHandlers.ofString());

    assertThat(response.statusCode()).isEqualTo(400);
    assertThat(provider.received()).hasSize(before);
  }

  private HttpResponse<String> call(String key) {
    try {
      return notify(key, sms(key, "Your code is 482913"));
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }
}
