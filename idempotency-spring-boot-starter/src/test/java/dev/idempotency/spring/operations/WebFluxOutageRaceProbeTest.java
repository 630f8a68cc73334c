package dev.idempotency.spring.operations;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.EmbeddedServers;
import dev.idempotency.spring.fluxapp.FluxEndpointApplication;
import dev.idempotency.spring.reactive.BlockingCalls;
import dev.idempotency.spring.reactive.NettyServer;
import dev.idempotency.testservers.FreePorts;
import dev.idempotency.testservers.Poll;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;

/**
 * Probes for a WebFlux request left unanswered during a database outage (a POST /notify of {@code
 * WebFluxActuatorTest}'s outage case got no answer within 60 s once, on Boot 4.0): the breaker's
 * probe and trial claim ({@code StoreOutages}) raced with many WebFlux requests on PostgreSQL
 * behind a {@link DatabaseGate}, a database that drops connections or hangs them, and that case's
 * own steps repeated on fresh applications. Every request must be answered (within {@link
 * dev.idempotency.spring.BoundedExchange}'s bound, which fails with a thread dump), 503 while the
 * database is away. Not reproduced so far: 6 and 25 fresh applications a run, and the racing
 * rounds, passed on Boot 3.5 and 4.0. Slow (90 to 200 s on a busy 2-core machine, each fresh
 * application 3 to 12 s): {@code extended}.
 */
@Tag("extended")
class WebFluxOutageRaceProbeTest {

  /** Serves the WebFlux test application on Reactor Netty. */
  @Configuration(proxyBeanMethods = false)
  @Import(NettyServer.class)
  static class OnNetty {}

  private static final int CONCURRENT = 16;

  @BeforeAll
  static void blockHound() {
    BlockingCalls.install();
  }

  @AfterEach
  void nothingBlockedANonBlockingThread() {
    BlockingCalls.assertNoneFromTheSdk();
  }

  private static ConfigurableApplicationContext start(String datasourceUrl) {
    return new SpringApplicationBuilder(FluxEndpointApplication.class, OnNetty.class)
        .properties(
            "server.port=0",
            "spring.main.banner-mode=off",
            "spring.main.web-application-type=reactive",
            "spring.datasource.url=" + datasourceUrl,
            "spring.datasource.username=postgres",
            "idempotency.jdbc.table-name=idem_webflux_outage_race",
            "idempotency.jdbc.initialize-schema=always",
            "management.health.db.enabled=false",
            "management.health.redis.enabled=false",
            "management.endpoint.health.show-details=always",
            "management.endpoints.web.exposure.include=*")
        .run();
  }

  private static int postgresPort() {
    Matcher port = Pattern.compile(":(\\d+)/").matcher(EmbeddedServers.postgresUrl());
    assertThat(port.find()).as(EmbeddedServers.postgresUrl()).isTrue();
    return Integer.parseInt(port.group(1));
  }

  private static HttpResponse<String> post(ConfigurableApplicationContext app, String key)
      throws Exception {
    return Apps.request(app, "POST", "/notify", key, "{\"channel\":\"sms\"}");
  }

  /** WebFluxActuatorTest's outage case, step by step, on fresh applications again and again. */
  @Test
  void theOutageCaseAnswersEveryTimeOnAFreshApplication() throws Exception {
    for (int round = 0; round < 6; round++) {
      String nothingListens = "jdbc:postgresql://127.0.0.1:" + FreePorts.next() + "/postgres";
      try (ConfigurableApplicationContext app = start(nothingListens)) {
        HttpResponse<String> read = Apps.get(app, "/actuator/idempotency?key=otp%3Au%3Ac1");
        HttpResponse<String> health = Apps.get(app, "/actuator/health");
        HttpResponse<String> call = post(app, UUID.randomUUID().toString());

        assertThat(read.statusCode()).as("round %d: %s", round, read.body()).isEqualTo(503);
        assertThat(health.statusCode()).as("round %d: %s", round, health.body()).isEqualTo(503);
        assertThat(call.statusCode()).as("round %d: %s", round, call.body()).isEqualTo(503);
      }
    }
  }

  /**
   * A port that accepts connections and never answers (a hung database, or a port another server
   * took, as the outage case's free port may be by the time it is used): still 503, in time.
   */
  @Test
  void aDatabaseThatNeverAnswersGets503s() throws Exception {
    try (DatabaseGate gate = new DatabaseGate(postgresPort(), DatabaseGate.Mode.SILENT);
        ConfigurableApplicationContext app = start(gate.postgresUrl())) {
      List<HttpResponse<String>> answers = concurrently(app, 1);
      answers.addAll(concurrently(app, 1));

      assertThat(answers).extracting(HttpResponse::statusCode).containsOnly(503);
    }
  }

  /**
   * The database goes away and comes back, again and again, while many requests come at once: the
   * breaker's probe and its one trial claim race them. Each is answered: 503 while refused, 201
   * once sent (a read: 404 for the absent key once the database answers).
   */
  @Test
  void manyRequestsRacingTheProbeAndTheTrialClaimAreAllAnswered() throws Exception {
    try (DatabaseGate gate = new DatabaseGate(postgresPort(), DatabaseGate.Mode.FORWARD);
        ConfigurableApplicationContext app = start(gate.postgresUrl())) {
      assertThat(post(app, UUID.randomUUID().toString()).statusCode()).isEqualTo(201);
      for (int round = 0; round < 4; round++) {
        DatabaseGate.Mode away = round % 2 == 0 ? DatabaseGate.Mode.DROP : DatabaseGate.Mode.SILENT;
        gate.switchTo(away);
        List<HttpResponse<String>> during = concurrently(app, 2);
        gate.switchTo(DatabaseGate.Mode.FORWARD);
        List<HttpResponse<String>> back = concurrently(app, 2);

        assertThat(during)
            .as("round %d, %s", round, away)
            .extracting(HttpResponse::statusCode)
            .isSubsetOf(201, 404, 503)
            .contains(503);
        assertThat(back)
            .as("round %d, back", round)
            .extracting(HttpResponse::statusCode)
            .isSubsetOf(201, 404, 503);
        Poll.within(Duration.ofSeconds(30))
            .until(
                "a send once the database is back",
                () -> post(app, UUID.randomUUID().toString()).statusCode(),
                status -> status == 201);
      }
    }
  }

  /**
   * {@code waves} waves of {@link #CONCURRENT} requests at once, POSTs of new keys and reads of the
   * Actuator endpoint; every answer, in order.
   */
  private static List<HttpResponse<String>> concurrently(
      ConfigurableApplicationContext app, int waves) throws Exception {
    ExecutorService clients = Executors.newFixedThreadPool(CONCURRENT);
    try {
      List<HttpResponse<String>> answers = new ArrayList<>();
      for (int wave = 0; wave < waves; wave++) {
        List<Future<HttpResponse<String>>> pending = new ArrayList<>();
        for (int i = 0; i < CONCURRENT; i++) {
          boolean read = i % 4 == 3;
          pending.add(
              clients.submit(
                  () ->
                      read
                          ? Apps.get(
                              app, "/actuator/idempotency?key=otp%3Au%3A" + UUID.randomUUID())
                          : post(app, UUID.randomUUID().toString())));
        }
        for (Future<HttpResponse<String>> answer : pending) {
          answers.add(answer.get());
        }
      }
      return answers;
    } finally {
      clients.shutdownNow();
    }
  }
}
