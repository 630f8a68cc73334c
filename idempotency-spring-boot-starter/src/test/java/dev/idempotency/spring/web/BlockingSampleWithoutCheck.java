package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.netty.DisposableServer;
import reactor.netty.http.client.HttpClient;
import reactor.netty.http.server.HttpServer;

/**
 * A sample test class for {@link BlockHoundUncheckedClassProbeTest} (not run by surefire: its name
 * does not end in Test): serves real HTTP on a Netty event loop, blocks there in a frame of the
 * SDK's package, and checks only the response, as most WebFlux test classes do.
 */
class BlockingSampleWithoutCheck {

  static final AtomicReference<String> blockedOn = new AtomicReference<>();

  @Test
  void servesItsResponse() {
    DisposableServer server =
        HttpServer.create()
            .host("127.0.0.1")
            .port(0)
            .handle(
                (request, response) ->
                    response.sendString(
                        Mono.fromCallable(BlockingSampleWithoutCheck::sleepAMoment)))
            .bindNow(Duration.ofSeconds(30));
    try {
      String body =
          HttpClient.create()
              .get()
              .uri("http://127.0.0.1:" + server.port() + "/")
              .responseContent()
              .aggregate()
              .asString()
              .block(Duration.ofSeconds(30));
      assertThat(body).isEqualTo("slept");
    } finally {
      server.disposeNow(Duration.ofSeconds(30));
    }
  }

  private static String sleepAMoment() throws InterruptedException {
    blockedOn.set(Thread.currentThread().getName());
    Thread.sleep(1);
    return "slept";
  }
}
