package dev.idempotency.examples.http;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spi.KeyStore;
import java.io.IOException;
import java.net.ServerSocket;
import java.net.http.HttpResponse;
import java.time.Duration;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import redis.embedded.RedisServer;

/** The HTTP example on a real Redis, opened from a URI as the command line would. */
class RedisNotifyServerTest extends NotifyServerContract {

  static RedisServer redis;
  static String uri;
  static KeyStore store;

  @BeforeAll
  static void startRedis() throws IOException {
    int port;
    try (ServerSocket socket = new ServerSocket(0)) {
      port = socket.getLocalPort();
    }
    redis = RedisServer.builder().port(port).setting("bind 127.0.0.1").setting("save \"\"").build();
    redis.start();
    uri = "redis://127.0.0.1:" + port;
    store = NotifyServer.openStore(uri);
  }

  @AfterAll
  static void stopRedis() {
    redis.stop();
  }

  @Override
  KeyStore store() {
    return store;
  }

  @Test
  void twoServerInstancesOnOneRedisSendOnce() throws Exception {
    String key = newKey();
    post(key, SMS_BODY);
    try (NotifyServer second =
        new NotifyServer(0, NotifyServer.openStore(uri), Duration.ofSeconds(2))) {
      HttpResponse<String> onSecond =
          http.send(
              java.net.http.HttpRequest.newBuilder(
                      java.net.URI.create("http://127.0.0.1:" + second.port() + "/notify"))
                  .header("Idempotency-Key", key)
                  .POST(java.net.http.HttpRequest.BodyPublishers.ofString(SMS_BODY))
                  .build(),
              HttpResponse.BodyHandlers.ofString());

      assertThat(onSecond.statusCode()).isEqualTo(200);
      assertThat(onSecond.headers().firstValue("Idempotent-Replayed")).hasValue("true");
      assertThat(second.sms.requests()).isZero();
    }
  }
}
