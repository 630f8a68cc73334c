package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.EmbeddedServers;
import dev.idempotency.spring.reactive.BlockingCalls;
import io.lettuce.core.KillArgs;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Issue 39 probe (probeC): the WebFlux endpoint on Redis (the guard's steps on the request's event
 * loop) while Redis drops the application's connections ({@code CLIENT KILL TYPE normal}) between
 * the claims and the outcomes, Redis itself staying up. SPEC 1: every send's outcome is recorded
 * once Lettuce reconnects (the retry replays it), no key is left in progress, nothing is sent
 * twice; BlockHound finds no blocking call of the SDK on an event loop.
 */
// passes; outside CI's time budget (docs/guarantees.md, "Tests outside the default build")
@Tag("extended")
class WebFluxRedisConnectionDroppedProbeTest extends WebFluxProbeSupport {

  @BeforeAll
  static void start() {
    BlockingCalls.install();
    start(WebFluxTestStores.REDIS, WebFluxTestStores.OnRedis.class);
  }

  @AfterEach
  void nothingBlockedANonBlockingThread() {
    BlockingCalls.assertNoneFromTheSdk();
  }

  private static void dropTheApplicationsConnections() {
    RedisClient admin =
        RedisClient.create(RedisURI.create("127.0.0.1", EmbeddedServers.redisPort()));
    try (StatefulRedisConnection<String, String> connection = admin.connect()) {
      assertThat(connection.sync().clientKill(KillArgs.Builder.typeNormal()))
          .as("connections killed")
          .isPositive();
    } finally {
      admin.shutdown();
    }
  }

  @Test
  void connectionsDroppedBetweenTheClaimsAndTheOutcomesNeitherLoseNorRepeatASend()
      throws Exception {
    int keys = 20;
    List<String> ids = new ArrayList<>();
    List<String> idemKeys = new ArrayList<>();
    List<CompletableFuture<HttpResponse<String>>> first = new ArrayList<>();
    for (int k = 0; k < keys; k++) {
      String id = UUID.randomUUID().toString();
      ids.add(id);
      idemKeys.add(UUID.randomUUID().toString());
      first.add(
          CLIENT.sendAsync(
              post("/held/" + id, idemKeys.get(k)), HttpResponse.BodyHandlers.ofString()));
    }
    for (String id : ids) {
      await(Probes.runs(id), 1); // claimed, the send started
    }
    dropTheApplicationsConnections();
    for (String id : ids) {
      Probes.answer(id).tryEmitValue("accepted-" + id);
    }
    List<HttpResponse<String>> answered = new ArrayList<>();
    for (CompletableFuture<HttpResponse<String>> response : first) {
      answered.add(response.get(WAIT_SECONDS, TimeUnit.SECONDS));
    }
    List<HttpResponse<String>> retries = new ArrayList<>();
    for (int k = 0; k < keys; k++) {
      retries.add(retry("/held/" + ids.get(k), idemKeys.get(k)));
    }

    for (int k = 0; k < keys; k++) {
      HttpResponse<String> response = answered.get(k);
      HttpResponse<String> retried = retries.get(k);
      assertThat(response.statusCode())
          .as("first of key %d: %s", k, response.body())
          .isEqualTo(200);
      assertThat(retried.statusCode()).as("retry of key %d: %s", k, retried.body()).isEqualTo(200);
      assertThat(replayed(retried)).as("the retry of key %d replays", k).isTrue();
      assertThat(retried.body()).contains("accepted-" + ids.get(k)).contains("\"run\":1");
      assertThat(Probes.runs(ids.get(k)).get()).as("runs of key %d", k).isEqualTo(1);
    }
  }
}
