package dev.idempotency.examples.webflux;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyEvent;
import dev.idempotency.IdempotencyListener;
import java.io.IOException;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Queue;
import java.util.UUID;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import redis.embedded.RedisServer;

/**
 * A sample test class for {@link BlockHoundForTheSdkTest} (not run by surefire: its name does not
 * end in Test): the example's application with one more bean, an {@link IdempotencyListener} that
 * blocks (a moment's sleep), which the SDK calls on the thread its Redis store answered on. Its
 * test serves one request and checks only the response, as the example's own tests do.
 */
@SpringBootTest(
    classes = {ReactiveNotifyApplication.class, BlockingListenerSample.BlockingListener.class},
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
    properties = {"provider.delay=0ms", "spring.main.banner-mode=off"})
// closed after its test (so before its Redis is stopped), not kept in Spring's context cache
@DirtiesContext(classMode = DirtiesContext.ClassMode.AFTER_EACH_TEST_METHOD)
class BlockingListenerSample {

  /** The threads the listener blocked on. */
  static final Queue<String> blockedOn = new ConcurrentLinkedQueue<>();

  private static RedisServer redis;

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

  @Test
  void servesARequest() throws Exception {
    String key = "otp-" + UUID.randomUUID();
    HttpRequest request =
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/notify"))
            .timeout(Duration.ofSeconds(30))
            .header("Content-Type", "application/json")
            .header("Idempotency-Key", key)
            .POST(
                HttpRequest.BodyPublishers.ofString(
                    "{\"recipient\":\"+1555-0100\",\"text\":\"Your code is 482913\"}"))
            .build();

    HttpResponse<String> response =
        HttpClient.newHttpClient().send(request, HttpResponse.BodyHandlers.ofString());

    assertThat(response.statusCode()).isEqualTo(200);
  }

  /** Blocks on every event, as a listener writing to a blocking audit log would. */
  static class BlockingListener implements IdempotencyListener {

    @Override
    public void onEvent(IdempotencyEvent event) {
      blockedOn.add(Thread.currentThread().getName());
      try {
        Thread.sleep(1);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }
}
