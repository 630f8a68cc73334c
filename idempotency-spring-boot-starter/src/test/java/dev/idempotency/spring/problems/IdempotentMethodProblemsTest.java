package dev.idempotency.spring.problems;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.BoundedExchange;
import dev.idempotency.spring.Idempotent;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.stereotype.Service;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;

/**
 * A controller that calls an {@code @Idempotent} method, in a real Boot application over real HTTP:
 * the guard's refusals reach the client as the endpoint's problems (422, 409, 503), not as Boot's
 * generic 500, and the mapping can be turned off.
 */
class IdempotentMethodProblemsTest {

  static final HttpClient HTTP =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

  private ConfigurableApplicationContext app;

  @AfterEach
  void stop() {
    if (app != null) {
      app.close();
    }
  }

  @SpringBootApplication
  @org.springframework.context.annotation.Import({Sender.class, Controller.class})
  static class ProblemsApplication {
    @Bean
    SwitchableKeyStore switchableKeyStore() {
      return new SwitchableKeyStore();
    }
  }

  /** The bean is a proxy: its state is reached through methods. */
  @Service
  static class Sender {
    private final AtomicInteger sends = new AtomicInteger();
    private volatile CountDownLatch hold = new CountDownLatch(0);
    private volatile CountDownLatch started = new CountDownLatch(1);

    @Idempotent(key = "#id", fingerprint = "#text")
    public String send(String id, String text) throws InterruptedException {
      started.countDown();
      hold.await(30, TimeUnit.SECONDS);
      return "n_" + sends.incrementAndGet();
    }

    public void holdNext() {
      started = new CountDownLatch(1);
      hold = new CountDownLatch(1);
    }

    public boolean awaitStarted() throws InterruptedException {
      return started.await(30, TimeUnit.SECONDS);
    }

    public void release() {
      hold.countDown();
    }

    public int sends() {
      return sends.get();
    }
  }

  @RestController
  static class Controller {
    private final Sender sender;

    Controller(Sender sender) {
      this.sender = sender;
    }

    @PostMapping("/send/{id}")
    String send(@PathVariable String id, @RequestParam String text) throws InterruptedException {
      return sender.send(id, text);
    }
  }

  private void start(String... properties) {
    app =
        new SpringApplicationBuilder(ProblemsApplication.class)
            .properties(
                "server.port=0", "spring.main.banner-mode=off", "idempotency.in-flight-wait=100ms")
            .properties(properties)
            .run();
  }

  private HttpResponse<String> post(String id, String text) throws Exception {
    int port = app.getEnvironment().getProperty("local.server.port", Integer.class);
    HttpRequest request =
        HttpRequest.newBuilder(
                URI.create("http://127.0.0.1:" + port + "/send/" + id + "?text=" + text))
            .timeout(Duration.ofSeconds(60))
            .POST(HttpRequest.BodyPublishers.noBody())
            .build();
    return BoundedExchange.send(HTTP, request, HttpResponse.BodyHandlers.ofString());
  }

  @Test
  void reuseInProgressAndOutageAnswer422And409And503WithNothingSent() throws Exception {
    start();
    Sender sender = app.getBean(Sender.class);
    SwitchableKeyStore store = app.getBean(SwitchableKeyStore.class);
    String id = "order-" + UUID.randomUUID();

    assertThat(post(id, "hello").body()).isEqualTo("n_1");
    HttpResponse<String> reused = post(id, "other");
    assertThat(reused.statusCode()).isEqualTo(422);
    assertThat(reused.headers().firstValue("Content-Type")).hasValue("application/problem+json");
    assertThat(reused.body())
        .contains("/problems/key-reused")
        .contains("\"detail\":\"this idempotency key was already used with a different request");

    sender.holdNext();
    String held = "order-" + UUID.randomUUID();
    CompletableFuture<HttpResponse<String>> first =
        CompletableFuture.supplyAsync(
            () -> {
              try {
                return post(held, "hello");
              } catch (Exception e) {
                throw new IllegalStateException(e);
              }
            });
    assertThat(sender.awaitStarted()).isTrue();
    HttpResponse<String> inProgress = post(held, "hello");
    sender.release();
    assertThat(inProgress.statusCode()).isEqualTo(409);
    assertThat(inProgress.headers().firstValue("Retry-After")).hasValue("1");
    assertThat(inProgress.body()).contains("/problems/request-in-progress");
    assertThat(first.get(60, TimeUnit.SECONDS).body()).isEqualTo("n_2");

    store.down.set(true);
    HttpResponse<String> outage = post("order-" + UUID.randomUUID(), "hello");
    assertThat(outage.statusCode()).isEqualTo(503);
    assertThat(outage.headers().firstValue("Retry-After")).hasValue("5");
    assertThat(outage.body()).contains("/problems/store-unavailable");
    assertThat(sender.sends()).isEqualTo(2);
  }

  @Test
  void theMappingCanBeTurnedOff() throws Exception {
    start("idempotency.http.problem-details=false");
    String id = "order-" + UUID.randomUUID();
    assertThat(post(id, "hello").statusCode()).isEqualTo(200);
    assertThat(post(id, "other").statusCode()).isEqualTo(500);
  }
}
