package dev.idempotency.spring.operations;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.idempotency.spring.EmbeddedServers;
import org.junit.jupiter.api.Test;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * On a database that answers, a missing table fails the start with what to do about it, rather than
 * a 503 on every request whose cause sits down a stack trace; with schema initialisation on, the
 * table is created at startup.
 */
class JdbcTableCheckTest {

  @Test
  void aMissingTableFailsTheStartNamingTheTableThePropertyAndTheDdl() {
    Throwable failure =
        catchThrowable(
            () -> {
              try (ConfigurableApplicationContext app =
                  Apps.start(
                      "spring.datasource.url=" + EmbeddedServers.postgresUrl(),
                      "idempotency.jdbc.table-name=idem_never_created")) {
                app.getId();
              }
            });

    assertThat(failure).as("the application did not start").isNotNull();
    Throwable root = failure;
    while (root.getCause() != null) {
      root = root.getCause();
    }
    assertThat(root)
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("idem_never_created")
        .hasMessageContaining("idempotency.jdbc.initialize-schema=always")
        .hasMessageContaining("dev/idempotency/jdbc/schema-postgresql.sql");
  }

  @Test
  void withSchemaInitialisationTheTableIsCreatedAtStartup() throws Exception {
    try (ConfigurableApplicationContext app =
        Apps.start(
            "spring.datasource.url=" + EmbeddedServers.postgresUrl(),
            "idempotency.jdbc.table-name=idem_created_at_start",
            "idempotency.jdbc.initialize-schema=always")) {
      org.springframework.jdbc.core.JdbcTemplate jdbc =
          new org.springframework.jdbc.core.JdbcTemplate(app.getBean(javax.sql.DataSource.class));

      Integer rows =
          jdbc.queryForObject("SELECT count(*) FROM idem_created_at_start", Integer.class);

      assertThat(rows).as("created before the first call").isZero();
      assertThat(Apps.notify(app, Apps.newKey()).statusCode()).isEqualTo(201);
    }
  }
}
