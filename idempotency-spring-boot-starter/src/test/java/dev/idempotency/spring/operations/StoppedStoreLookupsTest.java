package dev.idempotency.spring.operations;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.testservers.FreePorts;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.net.URLEncoder;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Comparator;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.springframework.context.ConfigurableApplicationContext;
import redis.embedded.RedisServer;

/**
 * Issue 37 (SPEC 14): while a store that the application used is stopped (PostgreSQL, Redis: the
 * server really stopped after the pool or connection was in use), the Actuator endpoint and the
 * {@code idempotency} health contributor answer at once, as the guard's calls do once its breaker
 * is open, instead of waiting the store's own bound (about 2 s) on every lookup and every health
 * check; the health says DOWN with the reason and no key; and both recover without a restart once
 * the server answers again. The first refused request's time is printed: the figure of the docs'
 * outage table, on the Boot line the test runs on.
 */
class StoppedStoreLookupsTest {

  /** What "at once" means here, on a busy 2-core machine: far below the store's 2 s bound. */
  private static final long AT_ONCE_MILLIS = 1_000;

  private static String lookup(String key) {
    return "/actuator/idempotency?key=" + URLEncoder.encode(key, StandardCharsets.UTF_8);
  }

  private static final String[] MANAGEMENT = {
    "management.endpoints.web.exposure.include=health,idempotency",
    "management.endpoint.health.show-details=always",
    "management.health.db.enabled=false",
    "management.health.redis.enabled=false"
  };

  private record Timed(HttpResponse<String> response, long millis) {}

  private static Timed timed(ConfigurableApplicationContext app, String path) throws Exception {
    long start = System.nanoTime();
    HttpResponse<String> response = Apps.get(app, path);
    return new Timed(response, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start));
  }

  @Test
  void whilePostgresIsStoppedLookupsAndHealthAnswerAtOnceThenRecover() throws Exception {
    int port = FreePorts.next();
    Path dataDir = Files.createTempDirectory("idem-stopped-pg-").resolve("data");
    EmbeddedPostgres postgres = startPostgres(port, dataDir);
    try (ConfigurableApplicationContext app =
        Apps.start(
            Stream.concat(
                    Stream.of(
                        "spring.datasource.url=jdbc:postgresql://127.0.0.1:" + port + "/postgres",
                        "spring.datasource.username=postgres",
                        "idempotency.jdbc.initialize-schema=always"),
                    Stream.of(MANAGEMENT))
                .toArray(String[]::new))) {
      String sent = sendOne(app);

      postgres.close();
      measureTheOutage(app, "postgresql", sent);

      postgres = startPostgres(port, dataDir);
      assertRecovers(app, sent);
    } finally {
      postgres.close();
      deleteRecursively(dataDir.getParent());
    }
  }

  @Test
  void whileRedisIsStoppedLookupsAndHealthAnswerAtOnceThenRecover() throws Exception {
    int port = FreePorts.next();
    RedisServer redis = startRedis(port);
    try (ConfigurableApplicationContext app =
        Apps.start(
            Stream.concat(
                    Stream.of(
                        "spring.autoconfigure.exclude="
                            + "org.springframework.boot.autoconfigure.jdbc"
                            + ".DataSourceAutoConfiguration,"
                            + "org.springframework.boot.jdbc.autoconfigure"
                            + ".DataSourceAutoConfiguration",
                        "spring.data.redis.host=127.0.0.1",
                        "spring.data.redis.port=" + port,
                        "idempotency.store=redis"),
                    Stream.of(MANAGEMENT))
                .toArray(String[]::new))) {
      String sent = sendOne(app);

      redis.stop();
      measureTheOutage(app, "redis", sent);

      redis = startRedis(port); // empty: the record of the key is gone with the old server
      assertThat(
              Apps.within(
                  Duration.ofSeconds(60),
                  () -> get(app, "/actuator/health/idempotency").contains("\"UP\"")))
          .as("the health says UP once Redis answers, without a restart")
          .isTrue();
      assertThat(Apps.get(app, lookup(sent)).statusCode()).isEqualTo(404);
    } finally {
      redis.stop();
    }
  }

  /** One key sent through the guard, and one request over HTTP (the pool and the server warm). */
  private static String sendOne(ConfigurableApplicationContext app) throws Exception {
    String sent = "otp:user_42:" + UUID.randomUUID();
    app.getBean(IdempotencyGuard.class).execute(sent, Duration.ofHours(1), ctx -> "n_1");
    assertThat(Apps.notify(app, Apps.newKey()).statusCode()).isEqualTo(201);
    return sent;
  }

  /**
   * The store is stopped: the first guarded request meets the outage (and opens the guard's
   * breaker); lookups and health checks after it answer at once.
   */
  private static void measureTheOutage(
      ConfigurableApplicationContext app, String store, String sent) throws Exception {
    long start = System.nanoTime();
    HttpResponse<String> first = Apps.notify(app, Apps.newKey());
    long firstMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
    System.out.printf(
        "[outage figures] %s stopped, Spring Boot %s: the first guarded request answered %d in"
            + " %d ms%n",
        store,
        org.springframework.boot.SpringBootVersion.getVersion(),
        first.statusCode(),
        firstMillis);
    assertThat(first.statusCode()).isEqualTo(503);

    for (int i = 0; i < 3; i++) {
      Timed read = timed(app, lookup(sent));
      Timed health = timed(app, "/actuator/health/idempotency");

      assertThat(read.response().statusCode()).as(read.response().body()).isEqualTo(503);
      assertThat(read.millis())
          .as("a lookup while the store is known down")
          .isLessThan(AT_ONCE_MILLIS);
      assertThat(health.response().statusCode()).isEqualTo(503);
      assertThat(health.response().body())
          .contains("\"DOWN\"")
          .contains("\"store\":\"" + (store.equals("redis") ? "redis" : "jdbc") + "\"")
          .contains("\"error\"")
          .as("the reason names no key, raw or digested")
          .doesNotContain(sent)
          .doesNotContainPattern("[A-Za-z0-9_-]{43}");
      assertThat(health.millis())
          .as("a health check while the store is known down")
          .isLessThan(AT_ONCE_MILLIS);
    }
  }

  private static void assertRecovers(ConfigurableApplicationContext app, String sent)
      throws Exception {
    assertThat(
            Apps.within(
                Duration.ofSeconds(60),
                () -> get(app, "/actuator/health/idempotency").contains("\"UP\"")))
        .as("the health says UP once the store answers, without a restart")
        .isTrue();
    HttpResponse<String> read = Apps.get(app, lookup(sent));
    assertThat(read.statusCode()).as(read.body()).isEqualTo(200);
    assertThat(read.body()).contains("\"state\":\"COMPLETED\"");
    assertThat(Apps.notify(app, Apps.newKey()).statusCode()).isEqualTo(201);
  }

  private static String get(ConfigurableApplicationContext app, String path) {
    try {
      return Apps.get(app, path).body();
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  /** Keeps its data directory across a stop, so that the restarted server holds the records. */
  private static EmbeddedPostgres startPostgres(int port, Path dataDir) throws Exception {
    return EmbeddedPostgres.builder()
        .setPort(port)
        .setDataDirectory(dataDir)
        .setCleanDataDirectory(false)
        .setPGStartupWait(Duration.ofSeconds(120))
        .start();
  }

  private static RedisServer startRedis(int port) throws Exception {
    RedisServer redis =
        RedisServer.builder().port(port).setting("bind 127.0.0.1").setting("save \"\"").build();
    redis.start();
    return redis;
  }

  private static void deleteRecursively(Path dir) throws Exception {
    try (Stream<Path> paths = Files.walk(dir)) {
      for (Path path : paths.sorted(Comparator.reverseOrder()).toList()) {
        Files.deleteIfExists(path);
      }
    }
  }
}
