package dev.idempotency.spring.operations;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.ResultCodec;
import dev.idempotency.spring.EmbeddedServers;
import dev.idempotency.spring.autoconfigure.JdbcPurgeSchedule;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.jdbc.core.JdbcTemplate;

/**
 * The starter purges expired JDBC rows on a schedule, in bounded batches, from two instances of a
 * service at once on one PostgreSQL table, leaving live rows alone; turned off, it purges nothing.
 */
class JdbcPurgeTest {

  private static final String TABLE = "idem_purged";

  private static String[] properties(String... more) {
    List<String> all =
        new ArrayList<>(
            List.of(
                "spring.datasource.url=" + EmbeddedServers.postgresUrl(),
                "idempotency.jdbc.table-name=" + TABLE,
                "idempotency.jdbc.initialize-schema=always",
                "idempotency.lease=1s",
                "idempotency.jdbc.purge.interval=200ms",
                "idempotency.jdbc.purge.batch-size=7"));
    all.addAll(List.of(more));
    return all.toArray(String[]::new);
  }

  private static void send(IdempotencyGuard guard, String operation, Duration ttl, int count) {
    for (int i = 0; i < count; i++) {
      guard.executeForOutcome(
          IdempotencyRequest.of(operation + ":" + UUID.randomUUID(), ttl).withOperation(operation),
          ResultCodec.string(),
          ctx -> "sent");
    }
  }

  @Test
  void twoInstancesPurgeExpiredRowsInBatchesAndLeaveLiveOnes() throws Exception {
    try (ConfigurableApplicationContext one = Apps.start(properties());
        ConfigurableApplicationContext two = Apps.start(properties())) {
      JdbcTemplate jdbc = new JdbcTemplate(one.getBean(DataSource.class));
      IdempotencyGuard guard = one.getBean(IdempotencyGuard.class);
      send(guard, "expiring", Duration.ofSeconds(2), 60);
      send(guard, "live", Duration.ofHours(1), 5);

      boolean purged =
          Apps.within(
              Duration.ofSeconds(60),
              () -> jdbc.queryForObject("SELECT count(*) FROM " + TABLE, Integer.class) == 5);
      JdbcPurgeSchedule first = one.getBean(JdbcPurgeSchedule.class);
      JdbcPurgeSchedule second = two.getBean(JdbcPurgeSchedule.class);

      assertThat(purged).as("only the 5 live rows are left").isTrue();
      assertThat(first.purgedRows() + second.purgedRows())
          .as("the two instances deleted each expired row once between them")
          .isEqualTo(60);
      assertThat(first.completedRuns()).isPositive();
      assertThat(second.completedRuns()).isPositive();
    }
  }

  @Test
  void turnedOffItSchedulesNothing() {
    try (ConfigurableApplicationContext app =
        Apps.start(properties("idempotency.jdbc.purge.enabled=false"))) {
      assertThat(app.getBeansOfType(JdbcPurgeSchedule.class)).isEmpty();
    }
  }
}
