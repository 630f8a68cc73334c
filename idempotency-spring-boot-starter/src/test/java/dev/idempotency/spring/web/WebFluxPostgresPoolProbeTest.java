package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.spring.EmbeddedServers;
import dev.idempotency.spring.reactive.BlockingCalls;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.sql.Connection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * {@link WebFluxOtherSchedulerProbeSupport} on PostgreSQL with a pool of two connections (2 s to
 * get one), far fewer than the 120 requests at once: the store's calls wait on the guard's bounded
 * executor, never on an event loop; a request answers 200, 409 or 503, and never sends twice.
 */
// passes; outside CI's time budget (docs/guarantees.md, "Tests outside the default build")
@Tag("extended")
class WebFluxPostgresPoolProbeTest extends WebFluxOtherSchedulerProbeSupport {

  @Configuration(proxyBeanMethods = false)
  static class SmallPool {
    @Bean(destroyMethod = "close")
    DataSource dataSource() {
      HikariConfig config = new HikariConfig();
      config.setJdbcUrl(EmbeddedServers.postgresUrl());
      config.setMaximumPoolSize(2);
      config.setConnectionTimeout(2000);
      return new HikariDataSource(config);
    }
  }

  @BeforeAll
  static void start() {
    BlockingCalls.install();
    Map<String, Object> store = new HashMap<>(WebFluxTestStores.POSTGRES);
    start(store, SmallPool.class, OtherSchedulers.class);
  }

  /**
   * Both pooled connections held by the application elsewhere while 30 requests arrive: each
   * answers in bounded time (503 when no connection came within the pool's 2 s, nothing sent), the
   * event loop stays free ({@code /ping}), and once the connections are back every key's retry
   * answers 200 with one send.
   */
  @Test
  void aPoolHeldElsewhereAnswers503InBoundedTimeThenRecoversWithOneSendPerKey() throws Exception {
    DataSource dataSource = application.getBean(DataSource.class);
    int keys = 30;
    List<String> ids = new ArrayList<>();
    List<String> idemKeys = new ArrayList<>();
    List<CompletableFuture<HttpResponse<String>>> first = new ArrayList<>();
    List<Integer> statuses = new ArrayList<>();
    long pingMillis;
    try (Connection one = dataSource.getConnection();
        Connection two = dataSource.getConnection()) {
      for (int k = 0; k < keys; k++) {
        String id = UUID.randomUUID().toString();
        ids.add(id);
        idemKeys.add(UUID.randomUUID().toString());
        first.add(
            CLIENT.sendAsync(
                post("/parallel/" + id + "/50", idemKeys.get(k)),
                HttpResponse.BodyHandlers.ofString()));
      }
      long started = System.nanoTime();
      HttpResponse<String> ping =
          CLIENT.send(
              HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/ping"))
                  .timeout(Duration.ofSeconds(WAIT_SECONDS))
                  .GET()
                  .build(),
              HttpResponse.BodyHandlers.ofString());
      pingMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);
      assertThat(ping.body()).isEqualTo("pong");
      for (CompletableFuture<HttpResponse<String>> response : first) {
        statuses.add(response.get(WAIT_SECONDS, TimeUnit.SECONDS).statusCode());
      }
    }
    List<HttpResponse<String>> retries = new ArrayList<>();
    for (int k = 0; k < keys; k++) {
      retries.add(retry("/parallel/" + ids.get(k) + "/50", idemKeys.get(k)));
    }

    assertThat(pingMillis).as("/ping while the pool is held").isLessThan(10_000);
    assertThat(statuses).as("answers while the pool was held").containsOnly(503);
    for (int k = 0; k < keys; k++) {
      HttpResponse<String> retried = retries.get(k);
      assertThat(retried.statusCode()).as(retried.body()).isEqualTo(200);
      assertThat(Probes.runs(ids.get(k)).get()).as("runs of key %d", k).isEqualTo(1);
    }
  }
}
