package dev.idempotency.spring.operations;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.IdempotencyRecord;
import dev.idempotency.UnreadableRecordException;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spring.EmbeddedServers;
import dev.idempotency.spring.app.Mailer;
import java.net.URLEncoder;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * The {@code idempotency} Actuator endpoint over real HTTP on PostgreSQL: read a key, forget a
 * completed one so that it sends again, refuse to forget one in progress; not exposed until the
 * application exposes it, and read-only until the application grants it more access. Settings per
 * operation give an endpoint its own window. The tests of the exposed, writable endpoint share one
 * application (each on its own keys); the tests of other settings start their own.
 */
class ActuatorEndpointTest {

  private static final String UNRESTRICTED = "management.endpoint.idempotency.access=unrestricted";

  /** The endpoint exposed beside health, with every access: the tests that read and forget. */
  private static ConfigurableApplicationContext exposed;

  @BeforeAll
  static void startExposed() {
    exposed = start("health,idempotency", UNRESTRICTED);
  }

  @AfterAll
  static void closeExposed() {
    if (exposed != null) {
      exposed.close();
    }
  }

  private static String path(String key) {
    return "/actuator/idempotency?key=" + URLEncoder.encode(key, StandardCharsets.UTF_8);
  }

  private static ConfigurableApplicationContext start(String exposure, String... more) {
    List<String> properties =
        new ArrayList<>(
            List.of(
                "spring.datasource.url=" + EmbeddedServers.postgresUrl(),
                "idempotency.jdbc.table-name=idem_actuator",
                "idempotency.jdbc.initialize-schema=always",
                "idempotency.operations.otp-sms.ttl=90m",
                "management.health.redis.enabled=false",
                "management.endpoints.web.exposure.include=" + exposure));
    properties.addAll(List.of(more));
    return Apps.start(properties.toArray(String[]::new));
  }

  @Test
  void readsForgetsAndRefusesToForgetAKeyInProgress() throws Exception {
    ConfigurableApplicationContext app = exposed;
    IdempotencyGuard guard = app.getBean(IdempotencyGuard.class);
    String key = "otp:user_42:" + UUID.randomUUID();
    guard.execute(key, Duration.ofHours(24), ctx -> "n_1");

    HttpResponse<String> found = Apps.get(app, path(key));
    HttpResponse<String> absent = Apps.get(app, path("otp:user_42:" + UUID.randomUUID()));
    HttpResponse<String> forgotten = Apps.request(app, "DELETE", path(key), null, null);
    HttpResponse<String> gone = Apps.get(app, path(key));
    String again = guard.execute(key, Duration.ofHours(24), ctx -> "n_2");
    HttpResponse<String> invalid = Apps.get(app, "/actuator/idempotency?key=%01");

    assertThat(found.statusCode()).isEqualTo(200);
    assertThat(found.body()).contains("\"state\":\"COMPLETED\"").contains("\"attempt\":1");
    assertThat(found.body()).as("results are never shown").doesNotContain("n_1");
    assertThat(absent.statusCode()).isEqualTo(404);
    assertThat(forgotten.statusCode()).isEqualTo(200);
    assertThat(forgotten.body()).contains("\"forgotten\":true");
    assertThat(gone.statusCode()).isEqualTo(404);
    assertThat(again).as("a forgotten key sends again").isEqualTo("n_2");
    assertThat(invalid.statusCode()).isEqualTo(400);
  }

  /**
   * Issue 37: a row the store cannot read (a state written by something else) is that lookup's
   * error. It used to open the guard's breaker like an outage: a send of another key right after
   * was refused at once ("the key store is failing"; 503 over HTTP) until the guard's probe.
   */
  @Test
  void aRecordTheStoreCannotReadFailsThatLookupAloneAndSendsGoOn() throws Exception {
    ConfigurableApplicationContext app = exposed;
    IdempotencyGuard guard = app.getBean(IdempotencyGuard.class);
    String key = "otp:user_42:" + UUID.randomUUID();
    String marker = UUID.randomUUID().toString();
    guard.execute(key, Duration.ofHours(24), ctx -> "n_" + marker);
    try (Connection connection = app.getBean(DataSource.class).getConnection();
        PreparedStatement damage =
            connection.prepareStatement(
                "UPDATE idem_actuator SET state = 'SENT' WHERE position(? in payload) > 0")) {
      damage.setBytes(1, marker.getBytes(StandardCharsets.UTF_8));
      assertThat(damage.executeUpdate()).as("the one row of the key").isEqualTo(1);
    }

    assertThatThrownBy(() -> guard.find(key)).isInstanceOf(UnreadableRecordException.class);
    String other =
        guard.execute("otp:user_43:" + UUID.randomUUID(), Duration.ofHours(24), ctx -> "n_2");
    HttpResponse<String> unreadable = Apps.get(app, path(key));

    assertThat(other).as("a send right after is not refused as in an outage").isEqualTo("n_2");
    assertThat(unreadable.statusCode()).as("not 503: the store answered").isEqualTo(500);
    assertThat(unreadable.body()).contains("cannot read").doesNotContain(key);
  }

  @Test
  void aKeyInProgressIsNotForgotten() throws Exception {
    ConfigurableApplicationContext app = exposed;
    IdempotencyGuard guard = app.getBean(IdempotencyGuard.class);
    String key = "otp:user_42:" + UUID.randomUUID();
    CountDownLatch sending = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    ExecutorService sender = Executors.newSingleThreadExecutor();
    try {
      Future<String> send =
          sender.submit(
              () ->
                  guard.execute(
                      key,
                      Duration.ofHours(24),
                      ctx -> {
                        sending.countDown();
                        release.await(60, TimeUnit.SECONDS);
                        return "n_1";
                      }));
      assertThat(sending.await(60, TimeUnit.SECONDS)).isTrue();

      HttpResponse<String> refused = Apps.request(app, "DELETE", path(key), null, null);
      release.countDown();
      send.get(60, TimeUnit.SECONDS);

      assertThat(refused.body())
          .contains("\"forgotten\":false")
          .contains("\"state\":\"IN_PROGRESS\"");
      assertThat(guard.find(key)).map(IdempotencyRecord::attempt).hasValue(1);
      assertThat(guard.execute(key, Duration.ofHours(24), ctx -> "n_2")).isEqualTo("n_1");
    } finally {
      release.countDown();
      sender.shutdownNow();
    }
  }

  @Test
  void exposingEveryEndpointLetsNoAnonymousRequestForgetAKey() throws Exception {
    try (ConfigurableApplicationContext app = start("*")) {
      IdempotencyGuard guard = app.getBean(IdempotencyGuard.class);
      String key = "otp:user_42:" + UUID.randomUUID();
      guard.execute(key, Duration.ofHours(24), ctx -> "n_1");

      HttpResponse<String> delete = Apps.request(app, "DELETE", path(key), null, null);
      HttpResponse<String> read = Apps.get(app, path(key));

      assertThat(delete.statusCode())
          .as("read-only by default: deletes need management.endpoint.idempotency.access")
          .isBetween(400, 499);
      assertThat(read.statusCode()).as("reads stay available").isEqualTo(200);
      assertThat(guard.find(key)).map(IdempotencyRecord::state).hasValue(RecordState.COMPLETED);
      assertThat(guard.execute(key, Duration.ofHours(24), ctx -> "n_2"))
          .as("nothing was forgotten: no second send")
          .isEqualTo("n_1");
    }
  }

  /**
   * Settings that grant every endpoint (or this one) full access without naming this endpoint's
   * access: Boot reads them as unrestricted, so an anonymous DELETE would forget keys. The start
   * fails, naming the property that decides; nothing is exposed writable by accident.
   */
  @ParameterizedTest
  @ValueSource(
      strings = {
        "management.endpoint.idempotency.enabled=true",
        "management.endpoints.enabled-by-default=true",
        "management.endpoints.access.default=unrestricted"
      })
  void aSettingThatWouldMakeTheEndpointWritableByTheWayFailsTheStart(String setting) {
    assertThatThrownBy(() -> start("*", setting).close())
        .hasStackTraceContaining("management.endpoint.idempotency.access")
        .hasStackTraceContaining(setting.substring(0, setting.indexOf('=')));
  }

  @Test
  void thoseSettingsStartWhereTheEndpointsAccessIsNamed() throws Exception {
    try (ConfigurableApplicationContext app =
        start(
            "*",
            "management.endpoints.enabled-by-default=true",
            "management.endpoint.idempotency.access=read-only")) {
      IdempotencyGuard guard = app.getBean(IdempotencyGuard.class);
      String key = "otp:user_42:" + UUID.randomUUID();
      guard.execute(key, Duration.ofHours(24), ctx -> "n_1");
      assertThat(Apps.request(app, "DELETE", path(key), null, null).statusCode())
          .isBetween(400, 499);
      assertThat(guard.execute(key, Duration.ofHours(24), ctx -> "n_2")).isEqualTo("n_1");
    }
  }

  @Test
  void notExposedUntilTheApplicationSaysSo() throws Exception {
    try (ConfigurableApplicationContext app = start("health")) {
      assertThat(Apps.get(app, path("otp:user_42:x")).statusCode()).isEqualTo(404);
      assertThat(Apps.get(app, "/actuator/health").statusCode()).isEqualTo(200);
    }
  }

  @Test
  void anOperationsOwnTtlIsItsWindow() throws Exception {
    ConfigurableApplicationContext app = exposed;
    IdempotencyGuard guard = app.getBean(IdempotencyGuard.class);
    Mailer mailer = app.getBean(Mailer.class);
    String ownTtl = UUID.randomUUID().toString();
    String defaultTtl = UUID.randomUUID().toString();

    mailer.mdc(ownTtl);
    mailer.send(defaultTtl);
    IdempotencyRecord own = guard.find(IdempotencyKey.of("otp-sms", ownTtl)).orElseThrow();
    IdempotencyRecord other =
        guard.find(IdempotencyKey.of("Mailer.send", defaultTtl)).orElseThrow();

    assertThat(Duration.between(own.createdAt(), own.expiresAt()))
        .as("idempotency.operations.otp-sms.ttl=90m")
        .isCloseTo(Duration.ofMinutes(90), Duration.ofSeconds(1));
    assertThat(Duration.between(other.createdAt(), other.expiresAt()))
        .as("idempotency.default-ttl")
        .isCloseTo(Duration.ofHours(24), Duration.ofSeconds(1));
  }
}
