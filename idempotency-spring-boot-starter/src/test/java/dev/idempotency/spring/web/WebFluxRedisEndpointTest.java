package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.redis.RedisKeyStore;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spring.EmbeddedServers;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.output.StatusOutput;
import io.lettuce.core.protocol.CommandArgs;
import io.lettuce.core.protocol.CommandType;
import java.net.http.HttpResponse;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/** The endpoint cases on WebFlux and Redis, through Spring Data Redis's Lettuce connection. */
class WebFluxRedisEndpointTest extends WebFluxEndpointContract {

  @DynamicPropertySource
  static void stores(DynamicPropertyRegistry registry) {
    registry.add("idempotency.store", () -> "redis");
    registry.add("spring.data.redis.host", () -> "127.0.0.1");
    registry.add("spring.data.redis.port", EmbeddedServers::redisPort);
  }

  @Override
  Class<? extends KeyStore> expectedStore() {
    return RedisKeyStore.class;
  }

  /**
   * A stored answer goes to the client only once its outcome is written, as on Spring MVC: a
   * process that dies after the client got its answer cannot leave the key in progress, which would
   * make the client's next retry, one lease later, a second send. Redis holds the outcome's write
   * back here ({@code CLIENT PAUSE ... WRITE}, once the handler started): the answer comes after
   * the pause, not before it.
   */
  @Test
  void aStoredAnswerReachesTheClientOnlyOnceItsOutcomeIsWritten() throws Exception {
    String key = EndpointClient.newKey();
    CountDownLatch provider = new CountDownLatch(1);
    holdHandlers(provider);
    CompletableFuture<HttpResponse<byte[]>> answer =
        CompletableFuture.supplyAsync(
            () -> {
              try {
                return post("/notify", key, StatusCases.BODY);
              } catch (Exception e) {
                throw new IllegalStateException(e);
              }
            });
    assertThat(awaitAHeldHandler()).as("the send started").isTrue();
    long pausedAt;
    RedisClient client = RedisClient.create("redis://127.0.0.1:" + EmbeddedServers.redisPort());
    try (StatefulRedisConnection<String, String> redis = client.connect()) {
      pausedAt = System.nanoTime();
      redis
          .sync()
          .dispatch(
              CommandType.CLIENT,
              new StatusOutput<>(StringCodec.UTF8),
              new CommandArgs<>(StringCodec.UTF8).add("PAUSE").add(1000).add("WRITE"));
      provider.countDown();
      HttpResponse<byte[]> response = answer.get(30, TimeUnit.SECONDS);

      long answeredAfterMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - pausedAt);
      assertThat(response.statusCode()).as(EndpointClient.text(response)).isEqualTo(201);
      assertThat(answeredAfterMillis)
          .as("the answer waited for the outcome's write, which Redis held for 1,000 ms")
          .isGreaterThanOrEqualTo(950);
    } finally {
      client.shutdown();
    }
    HttpResponse<byte[]> repeat = post("/notify", key, StatusCases.BODY);
    assertThat(EndpointClient.header(repeat, "Idempotent-Replayed")).isEqualTo("true");
    assertThat(runs()).isEqualTo(1);
  }
}
