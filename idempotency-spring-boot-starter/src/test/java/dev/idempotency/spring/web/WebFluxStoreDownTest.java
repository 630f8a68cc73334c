package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.reactive.BlockingCalls;
import dev.idempotency.spring.reactive.NettyServer;
import dev.idempotency.spring.reactive.ReactiveNotifyController;
import dev.idempotency.spring.reactive.ReactiveTestApplication;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.UUID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.context.annotation.Import;

/**
 * A WebFlux endpoint while its store cannot answer: 503 with {@code Retry-After} in bounded time,
 * nothing run, no event loop blocked (the store's blocking calls run on the guard's executor), and
 * answers again once the store is back, without a restart.
 */
@SpringBootTest(
    classes = {ReactiveTestApplication.class, StoreDownEndpointTest.OwnStore.class},
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
    properties = "spring.main.web-application-type=reactive")
@Import(NettyServer.class)
class WebFluxStoreDownTest {

  @LocalServerPort int port;
  @Autowired StoreDownEndpointTest.SwitchableStore store;
  @Autowired ReactiveNotifyController controller;

  @BeforeAll
  static void blockHound() {
    BlockingCalls.install();
  }

  @AfterEach
  void nothingBlockedANonBlockingThread() {
    store.down.set(false);
    BlockingCalls.assertNoneFromTheSdk();
  }

  private HttpResponse<String> post(String key) throws Exception {
    return HttpClient.newHttpClient()
        .send(
            HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/notify"))
                .timeout(Duration.ofSeconds(20))
                .header("Content-Type", "application/json")
                .header("Idempotency-Key", key)
                .POST(HttpRequest.BodyPublishers.ofString("{\"to\":\"+4915\"}"))
                .build(),
            HttpResponse.BodyHandlers.ofString());
  }

  @Test
  void aStoreThatIsDownAnswers503AndRunsNothingThenRecoversWithoutARestart() throws Exception {
    String key = UUID.randomUUID().toString();
    int before = controller.sends();
    store.down.set(true);

    long started = System.nanoTime();
    HttpResponse<String> down = post(key);

    assertThat(Duration.ofNanos(System.nanoTime() - started)).isLessThan(Duration.ofSeconds(10));
    assertThat(down.statusCode()).isEqualTo(503);
    assertThat(down.headers().firstValue("Retry-After")).hasValue("5");
    assertThat(down.body()).contains("/problems/store-unavailable");
    assertThat(controller.sends()).isEqualTo(before);

    store.down.set(false);
    // the guard's breaker lets claims through again once its probe found the store answering
    // (StoreOutages): until then a request may still be refused 503, nothing run; bounded wait
    long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
    HttpResponse<String> back = post(key);
    while (back.statusCode() == 503 && System.nanoTime() < deadline) {
      assertThat(controller.sends()).isEqualTo(before);
      Thread.sleep(20);
      back = post(key);
    }

    assertThat(back.statusCode()).isEqualTo(201);
    assertThat(controller.sends()).isEqualTo(before + 1);
  }
}
