package dev.idempotency.spring.operations;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRecord;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spring.EmbeddedServers;
import dev.idempotency.spring.fluxapp.FluxEndpointApplication;
import dev.idempotency.spring.reactive.BlockingCalls;
import dev.idempotency.spring.reactive.NettyServer;
import dev.idempotency.testservers.FreePorts;
import java.net.URLEncoder;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;

/**
 * The Actuator endpoint, the health contributor and the Micrometer metrics in a Spring WebFlux
 * application on Reactor Netty, over real HTTP, on PostgreSQL (a blocking store: Actuator runs the
 * endpoint's operations and the health contributor off the event loop, which BlockHound checks):
 * the endpoint reads a key and stays read-only with every endpoint exposed, answers 503 while the
 * database does not answer; health reports the store; the calls of a WebFlux endpoint are counted.
 */
class WebFluxActuatorTest {

  /** Serves the WebFlux test application on Reactor Netty. */
  @Configuration(proxyBeanMethods = false)
  @Import(NettyServer.class)
  static class OnNetty {}

  @BeforeAll
  static void blockHound() {
    BlockingCalls.install();
  }

  @AfterEach
  void nothingBlockedANonBlockingThread() {
    BlockingCalls.assertNoneFromTheSdk();
  }

  private static ConfigurableApplicationContext start(String datasourceUrl, String... more) {
    List<String> properties =
        new ArrayList<>(
            List.of(
                "server.port=0",
                "spring.main.banner-mode=off",
                "spring.main.web-application-type=reactive",
                "spring.datasource.url=" + datasourceUrl,
                "spring.datasource.username=postgres",
                "idempotency.jdbc.table-name=idem_webflux_actuator",
                "idempotency.jdbc.initialize-schema=always",
                "management.health.db.enabled=false",
                "management.health.redis.enabled=false",
                "management.endpoint.health.show-details=always",
                "management.endpoints.web.exposure.include=*"));
    properties.addAll(List.of(more));
    return new SpringApplicationBuilder(FluxEndpointApplication.class, OnNetty.class)
        .properties(properties.toArray(String[]::new))
        .run();
  }

  /**
   * The health body with the idempotency contributor in this status, its keys in either order (Boot
   * 3.5 writes status first, Boot 4's Jackson 3 sorts details first).
   */
  private static String idempotencyHealth(String status) {
    return "(?s).*\"idempotency\":\\{(\"details\":\\{[^{}]*\\},)?\"status\":\"" + status + "\".*";
  }

  private static String path(String key) {
    return "/actuator/idempotency?key=" + URLEncoder.encode(key, StandardCharsets.UTF_8);
  }

  @Test
  void theEndpointReadsAKeyAndExposingEveryEndpointLetsNoRequestForgetIt() throws Exception {
    try (ConfigurableApplicationContext app = start(EmbeddedServers.postgresUrl())) {
      IdempotencyGuard guard = app.getBean(IdempotencyGuard.class);
      String key = "otp:user_42:" + UUID.randomUUID();
      guard.execute(key, Duration.ofHours(24), ctx -> "n_1");

      HttpResponse<String> found = Apps.get(app, path(key));
      HttpResponse<String> absent = Apps.get(app, path("otp:user_42:" + UUID.randomUUID()));
      HttpResponse<String> delete = Apps.request(app, "DELETE", path(key), null, null);

      assertThat(found.statusCode()).as(found.body()).isEqualTo(200);
      assertThat(found.body()).contains("\"state\":\"COMPLETED\"").doesNotContain("n_1");
      assertThat(absent.statusCode()).isEqualTo(404);
      assertThat(delete.statusCode()).as("read-only by default").isBetween(400, 499);
      assertThat(guard.find(key)).map(IdempotencyRecord::state).hasValue(RecordState.COMPLETED);
      assertThat(guard.execute(key, Duration.ofHours(24), ctx -> "n_2")).isEqualTo("n_1");
    }
  }

  @Test
  void healthReportsTheStoreAndTheEndpointsCallsAreCounted() throws Exception {
    try (ConfigurableApplicationContext app = start(EmbeddedServers.postgresUrl())) {
      String key = UUID.randomUUID().toString();
      String body = "{\"channel\":\"sms\"}";

      HttpResponse<String> first = Apps.request(app, "POST", "/notify", key, body);
      HttpResponse<String> repeat = Apps.request(app, "POST", "/notify", key, body);
      HttpResponse<String> health = Apps.get(app, "/actuator/health");
      HttpResponse<String> sent =
          Apps.get(app, "/actuator/metrics/idempotency.calls?tag=outcome:sent");
      HttpResponse<String> replayed =
          Apps.get(app, "/actuator/metrics/idempotency.calls?tag=outcome:replayed");
      HttpResponse<String> store =
          Apps.get(app, "/actuator/metrics/idempotency.store?tag=store:jdbc");

      assertThat(first.statusCode()).as(first.body()).isEqualTo(201);
      assertThat(repeat.headers().firstValue("Idempotent-Replayed")).hasValue("true");
      assertThat(health.statusCode()).as(health.body()).isEqualTo(200);
      assertThat(health.body()).matches(idempotencyHealth("UP"));
      assertThat(sent.statusCode()).as(sent.body()).isEqualTo(200);
      assertThat(sent.body()).contains("\"statistic\":\"COUNT\",\"value\":1.0");
      assertThat(replayed.body()).contains("\"statistic\":\"COUNT\",\"value\":1.0");
      assertThat(store.statusCode()).as(store.body()).isEqualTo(200);
    }
  }

  @Test
  void whileTheDatabaseDoesNotAnswerTheEndpointAndHealthAnswer503() throws Exception {
    String nothingListens = "jdbc:postgresql://127.0.0.1:" + FreePorts.next() + "/postgres";
    try (ConfigurableApplicationContext app = start(nothingListens)) {
      HttpResponse<String> read = Apps.get(app, path("otp:user_42:c1"));
      HttpResponse<String> health = Apps.get(app, "/actuator/health");
      HttpResponse<String> call =
          Apps.request(app, "POST", "/notify", UUID.randomUUID().toString(), "{}");

      assertThat(read.statusCode()).as(read.body()).isEqualTo(503);
      assertThat(health.statusCode()).as(health.body()).isEqualTo(503);
      assertThat(health.body()).matches(idempotencyHealth("DOWN"));
      assertThat(call.statusCode()).as(call.body()).isEqualTo(503);
    }
  }
}
