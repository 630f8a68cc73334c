package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.EmbeddedServers;
import java.net.http.HttpResponse;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * {@link WebFluxClientGoneRaceProbeTest} on PostgreSQL (embedded server), plus the store that
 * stalls between the claim and the record.
 */
@Tag("open-finding")
class WebFluxClientGoneRacePostgresProbeTest extends WebFluxClientGoneRaceProbeTest {

  @BeforeAll
  static void start() {
    start(WebFluxTestStores.POSTGRES, WebFluxTestStores.OnPostgres.class);
  }

  /**
   * Another transaction locks the records table against writes (a long migration, a vacuum full)
   * once the handler claimed its key and until its client got the answer (10 s at most, perf39):
   * once the table is writable again, the key is completed, never taken over: a retry replays the
   * first answer and the handler ran once.
   */
  @Test
  void theTableLockedBetweenTheClaimAndTheRecordNeitherLosesNorRepeatsTheSend() throws Exception {
    String id = UUID.randomUUID().toString();
    String key = UUID.randomUUID().toString();
    String path = "/held/" + id;
    CompletableFuture<HttpResponse<String>> first =
        CLIENT.sendAsync(post(path, key), HttpResponse.BodyHandlers.ofString());
    await(Probes.runs(id), 1);
    HttpResponse<String> answered;
    try (Connection locker = DriverManager.getConnection(EmbeddedServers.postgresUrl())) {
      locker.setAutoCommit(false);
      try (Statement statement = locker.createStatement()) {
        statement.execute("LOCK TABLE idempotency_records IN EXCLUSIVE MODE");
      }
      Probes.answer(id).tryEmitValue("accepted").orThrow();
      answered = first.get(WAIT_SECONDS, TimeUnit.SECONDS);
      locker.rollback();
    }
    HttpResponse<String> retry = retry(path, key);

    assertThat(answered.statusCode()).as(answered.body()).isEqualTo(200);
    assertThat(Probes.runs(id).get())
        .as("one run for one key (retry %s %s)", retry.statusCode(), retry.body())
        .isEqualTo(1);
    assertThat(retry.statusCode()).as(retry.body()).isEqualTo(200);
    assertThat(replayed(retry)).as("the retry is a replay: %s", retry.body()).isTrue();
    assertThat(retry.body()).isEqualTo(answered.body());
  }
}
