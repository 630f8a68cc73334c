package dev.idempotency.reliability;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.examples.http.NotifyServer;
import dev.idempotency.testservers.Poll;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The HTTP example with its store stopped under it, as a team would run it ({@code --store
 * redis://...} or {@code --store jdbc:postgresql://...}): {@code POST /notify} answers 503 within
 * seconds and sends nothing while the store is down, and 200 again once it is back, without
 * restarting the service.
 */
class NotifyServerOutageTest {

  static final String BODY =
      "{\"channel\":\"sms\",\"recipient\":\"+15550100042\",\"template\":\"otp\","
          + "\"params\":{\"code\":\"482913\"}}";

  final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

  @Test
  void redisStoppedAndStartedAgain() throws Exception {
    try (RestartableRedis redis = new RestartableRedis(false)) {
      outage(redis.uri(), redis::kill, redis::start);
    }
  }

  @Test
  void postgresqlStoppedAndStartedAgain() throws Exception {
    try (RestartablePostgres postgres = new RestartablePostgres()) {
      outage(postgres.url(), postgres::stop, postgres::restart);
    }
  }

  private void outage(
      String spec, StoreOutageTest.ThrowingRunnable down, StoreOutageTest.ThrowingRunnable up)
      throws Exception {
    try (NotifyServer server =
        new NotifyServer(0, NotifyServer.openStore(spec), Duration.ofSeconds(2))) {
      // the store just started: on a busy machine its first answers may take longer than the
      // server's 2 s bound (a 503), so the first send is polled for, within a generous bound
      String first = newKey();
      Poll.within(Duration.ofSeconds(60))
          .until("the first send answered 200", () -> post(server, first).statusCode() == 200);
      int sentBefore = server.sms.accepted().size();

      down.run();
      for (int i = 0; i < 3; i++) {
        long start = System.nanoTime();
        HttpResponse<String> response = post(server, newKey());
        long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        System.out.printf(
            "%s down: %d in %d ms%n", spec.substring(0, 8), response.statusCode(), millis);
        assertThat(response.statusCode()).isEqualTo(503);
        assertThat(response.headers().firstValue("Content-Type"))
            .hasValue("application/problem+json");
        assertThat(millis).as("answered within a few seconds").isLessThan(8_000);
      }
      assertThat(server.sms.accepted()).as("nothing sent while down").hasSize(sentBefore);

      up.run();
      String key = newKey();
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
      HttpResponse<String> back = post(server, key);
      while (back.statusCode() == 503 && System.nanoTime() < deadline) {
        Thread.sleep(200);
        back = post(server, key);
      }
      assertThat(back.statusCode()).as("200 again, without a restart").isEqualTo(200);
      assertThat(post(server, key).headers().firstValue("Idempotent-Replayed")).hasValue("true");
    }
  }

  private HttpResponse<String> post(NotifyServer server, String key) throws Exception {
    return http.send(
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + server.port() + "/notify"))
            .timeout(Duration.ofSeconds(60))
            .header("Idempotency-Key", key)
            .POST(HttpRequest.BodyPublishers.ofString(BODY))
            .build(),
        HttpResponse.BodyHandlers.ofString());
  }

  private static String newKey() {
    return "\"" + UUID.randomUUID() + "\"";
  }
}
