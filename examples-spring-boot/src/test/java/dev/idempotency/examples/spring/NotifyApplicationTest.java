package dev.idempotency.examples.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.examples.providers.FakeSmsProvider;
import dev.idempotency.jdbc.JdbcKeyStore;
import dev.idempotency.spi.KeyStore;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;

/** The curl session of docs/examples.md against the Spring Boot example, over real HTTP. */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class NotifyApplicationTest {

  static final String BODY =
      "{\"channel\":\"sms\",\"recipient\":\"+15550100042\",\"template\":\"otp\","
          + "\"params\":{\"code\":\"482913\"}}";

  @LocalServerPort int port;
  @Autowired FakeSmsProvider sms;
  @Autowired KeyStore store;

  HttpResponse<String> post(String key, String body) throws Exception {
    return HttpClient.newHttpClient()
        .send(
            HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/notify"))
                .timeout(Duration.ofSeconds(60))
                .header("Content-Type", "application/json")
                .header("Idempotency-Key", key)
                .POST(HttpRequest.BodyPublishers.ofString(body))
                .build(),
            HttpResponse.BodyHandlers.ofString());
  }

  @Test
  void theCurlSessionOfTheReadme() throws Exception {
    String key = "\"" + UUID.randomUUID() + "\"";
    int sentBefore = sms.accepted().size();

    HttpResponse<String> first = post(key, BODY);
    HttpResponse<String> repeat = post(key, BODY);
    HttpResponse<String> otherBody = post(key, BODY.replace("482913", "111111"));

    assertThat(store)
        .as("the starter chose the application's DataSource")
        .isInstanceOf(JdbcKeyStore.class);
    assertThat(first.statusCode()).isEqualTo(200);
    assertThat(first.body()).contains("\"notification_id\":\"n_").contains("\"channel\":\"sms\"");
    assertThat(repeat.statusCode()).isEqualTo(200);
    assertThat(repeat.body()).isEqualTo(first.body());
    assertThat(repeat.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(otherBody.statusCode()).isEqualTo(422);
    assertThat(otherBody.headers().firstValue("Content-Type")).hasValue("application/problem+json");
    assertThat(sms.accepted()).hasSize(sentBefore + 1);
    assertThat(sms.accepted().get(sms.accepted().size() - 1).idempotencyKey())
        .as("the provider got the provider key")
        .matches("[A-Za-z0-9_-]{43}");
  }

  @Test
  void aRequestTheHandlerRefusesIsAFinalAnswerReplayedWithItsErrorBody() throws Exception {
    String key = "\"" + UUID.randomUUID() + "\"";
    String fax = BODY.replace("\"sms\"", "\"fax\"");
    int sentBefore = sms.accepted().size();

    HttpResponse<String> first = post(key, fax);
    HttpResponse<String> repeat = post(key, fax);

    assertThat(first.statusCode()).isEqualTo(400);
    assertThat(first.body()).as("Spring's error page").contains("\"status\":400");
    assertThat(repeat.statusCode()).isEqualTo(400);
    assertThat(repeat.body()).isEqualTo(first.body());
    assertThat(repeat.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(sms.accepted()).hasSize(sentBefore);
  }

  @Test
  void aRepeatWhileTheSlowProviderSendsIs409() throws Exception {
    String key = "\"slow-" + UUID.randomUUID() + "\"";
    sms.delay(Duration.ofSeconds(4)); // longer than the 2 s a repeat waits for the first
    try {
      CompletableFuture<HttpResponse<String>> one = CompletableFuture.supplyAsync(() -> send(key));
      CompletableFuture<HttpResponse<String>> two = CompletableFuture.supplyAsync(() -> send(key));
      HttpResponse<String> a = one.get(60, TimeUnit.SECONDS);
      HttpResponse<String> b = two.get(60, TimeUnit.SECONDS);
      HttpResponse<String> conflict = a.statusCode() == 409 ? a : b;
      HttpResponse<String> sent = a.statusCode() == 409 ? b : a;

      assertThat(sent.statusCode()).isEqualTo(200);
      assertThat(conflict.statusCode()).isEqualTo(409);
      assertThat(conflict.headers().firstValue("Retry-After")).hasValue("1");
      assertThat(conflict.body()).contains("/problems/request-in-progress");
    } finally {
      sms.delay(Duration.ZERO);
    }
  }

  private HttpResponse<String> send(String key) {
    try {
      return post(key, BODY);
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }
}
