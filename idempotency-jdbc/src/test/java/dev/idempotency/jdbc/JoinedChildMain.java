package dev.idempotency.jdbc;

import dev.idempotency.IdempotencyGuard;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.time.Duration;
import org.jdbi.v3.core.Jdbi;

/**
 * The second JVM of the joined-transaction tests: claims a key and enqueues its outbox row in an
 * open transaction, prints {@code CLAIMED}, then commits on {@code COMMIT} from stdin, rolls back
 * on {@code ROLLBACK}, or is killed with the transaction still open. Arguments: JDBC URL, record
 * table, outbox table, key.
 */
public final class JoinedChildMain {

  private JoinedChildMain() {}

  /**
   * Runs the child.
   *
   * @param args URL, record table, outbox table, key
   * @throws Exception on any failure (the parent sees the exit code)
   */
  public static void main(String[] args) throws Exception {
    String url = args[0];
    String outbox = args[2];
    String key = args[3];
    JdbcKeyStore store = JdbcKeyStore.builder(Jdbi.create(url)).tableName(args[1]).build();
    try (IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
        Connection connection = DriverManager.getConnection(url)) {
      connection.setAutoCommit(false);
      String id =
          guard.executeInTransaction(
              store.joining(connection),
              key,
              Duration.ofHours(24),
              ctx -> {
                try (PreparedStatement insert =
                    connection.prepareStatement(
                        "INSERT INTO " + outbox + " (id, idem_key, body) VALUES (?, ?, ?)")) {
                  insert.setString(1, "child-" + key);
                  insert.setString(2, key);
                  insert.setString(3, "from the second JVM");
                  insert.executeUpdate();
                }
                return "child-" + key;
              });
      System.out.println("CLAIMED " + id);
      System.out.flush();
      BufferedReader in =
          new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
      String command = in.readLine();
      if ("COMMIT".equals(command)) {
        connection.commit();
      } else {
        connection.rollback();
      }
      System.out.println("DONE");
      System.out.flush();
    }
  }
}
