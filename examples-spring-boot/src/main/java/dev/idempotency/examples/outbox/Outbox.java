package dev.idempotency.examples.outbox;

import dev.idempotency.spring.Idempotent;
import java.util.List;
import java.util.UUID;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.stereotype.Repository;

/** The outbox table: the joined enqueue, and what the relay reads and marks. */
@Repository
public class Outbox {

  /** One notification waiting to be sent. */
  public record Row(String id, String phone, String text) {}

  private final JdbcTemplate jdbc;

  Outbox(JdbcTemplate jdbc) {
    this.jdbc = jdbc;
  }

  /**
   * Inserts a notification row, once per request key: the key's record joins the caller's
   * transaction, so the two commit or roll back together, and a repeat of the key after the commit
   * returns the committed row's id without inserting. Not {@code @Transactional} itself: call it
   * inside a transaction ({@link Notifications#notify}).
   *
   * @param requestKey the client's idempotency key
   * @param phone the recipient
   * @param text the message
   * @return the row's id
   */
  @Idempotent(
      name = "notify",
      key = "#requestKey",
      fingerprint = "#phone + ':' + #text",
      joinTransaction = true)
  public String enqueue(String requestKey, String phone, String text) {
    String id = UUID.randomUUID().toString();
    jdbc.update("INSERT INTO outbox (id, phone, body) VALUES (?, ?, ?)", id, phone, text);
    return id;
  }

  /**
   * Locks a batch of unsent rows for the caller's transaction; rows another relay holds are skipped
   * ({@code FOR UPDATE SKIP LOCKED}, PostgreSQL).
   *
   * @param limit the batch's size
   * @return the rows, oldest first
   */
  List<Row> lockUnsent(int limit) {
    return jdbc.query(
        "SELECT id, phone, body FROM outbox WHERE sent_at IS NULL"
            + " ORDER BY created_at LIMIT ? FOR UPDATE SKIP LOCKED",
        (rs, n) -> new Row(rs.getString("id"), rs.getString("phone"), rs.getString("body")),
        limit);
  }

  /**
   * Marks a row sent, with the provider's message id.
   *
   * @param id the row
   * @param providerMessageId what the provider answered
   */
  void markSent(String id, String providerMessageId) {
    jdbc.update(
        "UPDATE outbox SET sent_at = CURRENT_TIMESTAMP, provider_message_id = ? WHERE id = ?",
        providerMessageId,
        id);
  }
}
