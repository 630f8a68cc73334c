package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.EmbeddedServers;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import java.net.http.HttpResponse;
import java.util.HashMap;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@link WebFluxClientGoneRaceProbeTest} on Redis (embedded server), plus the store that stalls
 * between the claim and the record (perf39: the answer waits for the record, {@code
 * idempotency.http.record-wait} at most: 2 s here instead of the default 10 s, so that the stall
 * need only outlast 3 s of lease, not 10 s of wait).
 */
class WebFluxClientGoneRaceRedisProbeTest extends WebFluxClientGoneRaceProbeTest {

  @BeforeAll
  static void start() {
    Map<String, Object> properties = new HashMap<>(WebFluxTestStores.REDIS);
    properties.put("idempotency.http.record-wait", "2s");
    start(properties, WebFluxTestStores.OnRedis.class);
  }

  /**
   * Redis stalls (every client paused 4 s, past the 2 s record wait and the 3 s lease) once the
   * handler has claimed the key and before its outcome is written: the client gets its answer, and
   * once Redis answers again the key is completed, never taken over: a retry replays the first
   * answer and the handler has run once.
   *
   * <p>Why it holds past the lease, by design and not by timing: the completion is fenced by the
   * owner token alone ({@code complete-function.lua} does not look at the lease), it was written to
   * the store's one connection before the pause ended (the guard's attempts time out on the client,
   * but the commands stay in Redis's input buffer), and Redis runs one connection's commands in
   * order, so it is applied before any claim of the retry, which the test sends later on that same
   * connection. The docs promise no more than this ({@code docs/each-call.md}: "a store that is
   * back within the lease ... still records the send"; once the lease has ended "a repeat may take
   * the key over and send again, the rare duplicate of a crash"; SPEC 5: "{@code IN_PROGRESS},
   * lease expired (its owner crashed or stalled) | take it over"): this case shows the stronger
   * outcome when no other call reached the store during the stall.
   */
  @Test
  void redisStalledBetweenTheClaimAndTheRecordNeitherLosesNorRepeatsTheSend() throws Exception {
    String id = UUID.randomUUID().toString();
    String key = UUID.randomUUID().toString();
    String path = "/held/" + id;
    CompletableFuture<HttpResponse<String>> first =
        CLIENT.sendAsync(post(path, key), HttpResponse.BodyHandlers.ofString());
    await(Probes.runs(id), 1);
    RedisClient pauser =
        RedisClient.create(RedisURI.create("127.0.0.1", EmbeddedServers.redisPort()));
    try (StatefulRedisConnection<String, String> connection = pauser.connect()) {
      connection.sync().clientPause(4_000);
    } finally {
      pauser.shutdown();
    }
    Probes.answer(id).tryEmitValue("accepted").orThrow();

    HttpResponse<String> answered = first.get(WAIT_SECONDS, TimeUnit.SECONDS);
    HttpResponse<String> retry = retry(path, key);

    assertThat(answered.statusCode()).as(answered.body()).isEqualTo(200);
    assertThat(retry.statusCode()).as(retry.body()).isEqualTo(200);
    assertThat(replayed(retry)).as("the retry is a replay: %s", retry.body()).isTrue();
    assertThat(retry.body()).isEqualTo(answered.body());
    assertThat(Probes.runs(id).get()).as("one run for one key").isEqualTo(1);
  }
}
