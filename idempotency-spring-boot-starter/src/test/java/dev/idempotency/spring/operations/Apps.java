package dev.idempotency.spring.operations;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.BoundedExchange;
import dev.idempotency.spring.app.NotifyTestApplication;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.UUID;
import java.util.function.Supplier;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * The test application started by hand, for tests that start and stop servers around it, and its
 * HTTP client.
 */
final class Apps {
  private Apps() {}

  static final HttpClient HTTP =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

  /** Starts the test application on a free port, with these properties ({@code name=value}). */
  static ConfigurableApplicationContext start(String... properties) {
    return new SpringApplicationBuilder(NotifyTestApplication.class)
        .properties("server.port=0", "spring.main.banner-mode=off")
        .properties(properties)
        .run();
  }

  static int port(ConfigurableApplicationContext app) {
    Integer port = app.getEnvironment().getProperty("local.server.port", Integer.class);
    assertThat(port).as("the application listens").isNotNull();
    return port;
  }

  static HttpResponse<String> request(
      ConfigurableApplicationContext app, String method, String path, String key, String json)
      throws Exception {
    HttpRequest.Builder request =
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port(app) + path))
            .timeout(Duration.ofSeconds(60))
            .method(
                method,
                json == null
                    ? HttpRequest.BodyPublishers.noBody()
                    : HttpRequest.BodyPublishers.ofString(json));
    if (json != null) {
      request.header("Content-Type", "application/json");
    }
    if (key != null) {
      request.header("Idempotency-Key", key);
    }
    return BoundedExchange.send(HTTP, request.build(), HttpResponse.BodyHandlers.ofString());
  }

  static HttpResponse<String> get(ConfigurableApplicationContext app, String path)
      throws Exception {
    return request(app, "GET", path, null, null);
  }

  static HttpResponse<String> notify(ConfigurableApplicationContext app, String key)
      throws Exception {
    return request(app, "POST", "/notify", key, "{\"channel\":\"sms\"}");
  }

  static String newKey() {
    return UUID.randomUUID().toString();
  }

  /** Polls until {@code done} holds, for at most {@code limit}. */
  static boolean within(Duration limit, Supplier<Boolean> done) throws InterruptedException {
    long deadline = System.nanoTime() + limit.toNanos();
    long pause = 20;
    while (System.nanoTime() < deadline) {
      if (done.get()) {
        return true;
      }
      Thread.sleep(pause);
      pause = Math.min(500, pause * 2);
    }
    return done.get();
  }
}
