package dev.idempotency.spring.operations;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.jdbc.JdbcDialect;
import dev.idempotency.jdbc.JdbcKeyStore;
import dev.idempotency.spring.app.Runs;
import dev.idempotency.testservers.FreePorts;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.net.http.HttpResponse;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.springframework.context.ConfigurableApplicationContext;
import redis.embedded.RedisServer;

/**
 * A service whose store is down when it starts still starts (with the default settings, where the
 * starter used to connect at startup to see whether the database was an embedded one): its
 * idempotent endpoints answer 503 (fail closed, at once rather than after the pool's 30 s), an
 * operation set to fail open sends, the health contributor says down, and once the server answers
 * everything works without a restart. PostgreSQL and Redis are really stopped: nothing listens on
 * their ports until the test starts them.
 */
class StartWithoutStoreTest {

  /** Posts {@code key} until the answer is not 503, for at most a minute; the last answer. */
  private static HttpResponse<String> notifyOnceItAnswers(
      ConfigurableApplicationContext app, String key) throws Exception {
    List<HttpResponse<String>> answers = new ArrayList<>();
    Apps.within(
        Duration.ofSeconds(60),
        () -> {
          try {
            answers.add(Apps.notify(app, key));
          } catch (Exception e) {
            throw new IllegalStateException(e);
          }
          return answers.get(answers.size() - 1).statusCode() != 503;
        });
    return answers.get(answers.size() - 1);
  }

  @Test
  void startsWhilePostgresIsDownFailsClosedThenWorksOnceItAnswers() throws Exception {
    int port = FreePorts.next();
    try (ConfigurableApplicationContext app =
        Apps.start(
            "spring.datasource.url=jdbc:postgresql://127.0.0.1:" + port + "/postgres",
            "spring.datasource.username=postgres",
            "idempotency.operations.campaign-launch.fail-open=true",
            "management.endpoints.web.exposure.include=health",
            "management.endpoint.health.show-details=always",
            "management.health.db.enabled=false",
            "management.health.redis.enabled=false")) {
      Runs runs = app.getBean(Runs.class);
      String key = Apps.newKey();

      long start = System.nanoTime();
      HttpResponse<String> down = Apps.notify(app, key);
      long downMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
      System.out.printf(
          "[outage figures] postgresql down since the start, Spring Boot %s: the first guarded"
              + " request answered %d in %d ms%n",
          org.springframework.boot.SpringBootVersion.getVersion(), down.statusCode(), downMillis);
      HttpResponse<String> health = Apps.get(app, "/actuator/health/idempotency");
      int runsBefore = runs.get();
      HttpResponse<String> failOpen =
          Apps.request(app, "POST", "/campaigns/c1/launch", Apps.newKey(), "{}");

      assertThat(down.statusCode()).isEqualTo(503);
      assertThat(downMillis)
          .as("fails within idempotency.jdbc.connection-wait (2 s), not Hikari's 30 s")
          .isLessThan(10_000);
      assertThat(health.statusCode()).isEqualTo(503);
      assertThat(health.body()).contains("\"DOWN\"").contains("\"store\":\"jdbc\"");
      assertThat(failOpen.statusCode())
          .as("idempotency.operations.campaign-launch.fail-open=true sends anyway")
          .isEqualTo(200);
      assertThat(runs.get() - runsBefore).isEqualTo(1);

      try (EmbeddedPostgres postgres =
          EmbeddedPostgres.builder()
              .setPort(port)
              .setPGStartupWait(Duration.ofSeconds(120))
              .start()) {
        // the service's migrations create the table (schema initialisation is off by default)
        try (Connection connection =
                DriverManager.getConnection(
                    "jdbc:postgresql://127.0.0.1:" + port + "/postgres", "postgres", "");
            Statement statement = connection.createStatement()) {
          statement.execute(JdbcKeyStore.schemaSql(JdbcDialect.POSTGRESQL, "idempotency_records"));
        }
        HttpResponse<String> first = notifyOnceItAnswers(app, key);
        HttpResponse<String> repeat = Apps.notify(app, key);
        HttpResponse<String> healthUp = Apps.get(app, "/actuator/health/idempotency");

        assertThat(first.statusCode()).as("answered once PostgreSQL does").isEqualTo(201);
        assertThat(repeat.statusCode()).isEqualTo(201);
        assertThat(repeat.headers().firstValue("Idempotent-Replayed")).hasValue("true");
        assertThat(repeat.body()).isEqualTo(first.body());
        assertThat(healthUp.statusCode()).isEqualTo(200);
        assertThat(healthUp.body()).contains("\"UP\"");
      }
    }
  }

  @Test
  void startsWhileRedisIsDownFailsClosedThenWorksOnceItAnswers() throws Exception {
    int port = FreePorts.next();
    try (ConfigurableApplicationContext app =
        Apps.start(
            "spring.autoconfigure.exclude="
                + "org.springframework.boot.autoconfigure.jdbc.DataSourceAutoConfiguration,"
                + "org.springframework.boot.jdbc.autoconfigure.DataSourceAutoConfiguration",
            "spring.data.redis.host=127.0.0.1",
            "spring.data.redis.port=" + port,
            "idempotency.store=redis",
            "management.endpoints.web.exposure.include=health",
            "management.endpoint.health.show-details=always",
            "management.health.redis.enabled=false")) {
      String key = Apps.newKey();

      long start = System.nanoTime();
      HttpResponse<String> down = Apps.notify(app, key);
      long downMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
      HttpResponse<String> health = Apps.get(app, "/actuator/health/idempotency");

      assertThat(down.statusCode()).isEqualTo(503);
      assertThat(downMillis).isLessThan(15_000);
      assertThat(health.body()).contains("\"DOWN\"").contains("\"store\":\"redis\"");

      RedisServer redis =
          RedisServer.builder().port(port).setting("bind 127.0.0.1").setting("save \"\"").build();
      redis.start();
      try {
        HttpResponse<String> first = notifyOnceItAnswers(app, key);
        HttpResponse<String> repeat = Apps.notify(app, key);

        assertThat(first.statusCode()).as("answered once Redis does").isEqualTo(201);
        assertThat(repeat.headers().firstValue("Idempotent-Replayed")).hasValue("true");
        assertThat(repeat.body()).isEqualTo(first.body());
        assertThat(Apps.get(app, "/actuator/health/idempotency").body()).contains("\"UP\"");
      } finally {
        redis.stop();
      }
    }
  }
}
