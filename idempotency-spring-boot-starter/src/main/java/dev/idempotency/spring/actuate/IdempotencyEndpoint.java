package dev.idempotency.spring.actuate;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRecord;
import dev.idempotency.spi.RecordState;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.actuate.endpoint.Access;
import org.springframework.boot.actuate.endpoint.InvalidEndpointRequestException;
import org.springframework.boot.actuate.endpoint.annotation.DeleteOperation;
import org.springframework.boot.actuate.endpoint.annotation.Endpoint;
import org.springframework.boot.actuate.endpoint.annotation.ReadOperation;

/**
 * The {@code idempotency} Actuator endpoint, for support: {@code GET /actuator/idempotency?key=...}
 * reports a key's record (404 when the store holds none), and {@code DELETE
 * /actuator/idempotency?key=...} forgets a completed or failed one so that the next call sends
 * again. A key in progress is never forgotten: its owner may be sending right now.
 *
 * <p>Like every endpoint but {@code health}, it is not exposed over HTTP until the application says
 * so ({@code management.endpoints.web.exposure.include=health,idempotency}). Its default access is
 * read-only, so exposing every endpoint ({@code include=*}) never lets a request forget a key: the
 * delete operation exists only with {@code management.endpoint.idempotency.access=unrestricted}
 * (Spring Boot's endpoint access model); secure it then as the application secures its other
 * Actuator endpoints, since forgetting a key allows one more send. Over HTTP, a store that cannot
 * answer is a 503 ({@link IdempotencyEndpointWebExtension}). The key is the caller's idempotency
 * key exactly as the application passes it to the guard (for {@code @IdempotentEndpoint}, its
 * scoped form). Results are never shown.
 */
@Endpoint(id = "idempotency", defaultAccess = Access.READ_ONLY)
public final class IdempotencyEndpoint {

  private final IdempotencyGuard guard;

  /**
   * Creates the endpoint.
   *
   * @param guard the guard whose store it reads
   */
  public IdempotencyEndpoint(IdempotencyGuard guard) {
    this.guard = Objects.requireNonNull(guard, "guard must not be null");
  }

  /**
   * A key's record.
   *
   * @param key the idempotency key
   * @return its state, attempt and times, or {@code null} (404) if the store holds none
   */
  @ReadOperation
  public @Nullable Map<String, Object> find(String key) {
    return record(key).map(IdempotencyEndpoint::describe).orElse(null);
  }

  /**
   * Forgets a completed or failed key, so that its next call sends again.
   *
   * @param key the idempotency key
   * @return whether it was forgotten, and the record's state before
   */
  @DeleteOperation
  public Map<String, Object> forget(String key) {
    Optional<IdempotencyRecord> before = record(key);
    Map<String, Object> answer = new LinkedHashMap<>();
    if (before.isEmpty()) {
      answer.put("forgotten", false);
      answer.put("reason", "the store holds no record of this key");
      return answer;
    }
    RecordState state = before.get().state();
    boolean forgotten = state != RecordState.IN_PROGRESS && guard.forget(key);
    answer.put("forgotten", forgotten);
    answer.put("state", state.name());
    if (!forgotten) {
      answer.put(
          "reason",
          state == RecordState.IN_PROGRESS
              ? "the key is in progress: its owner may be sending now"
              : "the record changed or ended meanwhile; read it again");
    }
    return answer;
  }

  private Optional<IdempotencyRecord> record(String key) {
    try {
      return guard.find(key);
    } catch (IllegalArgumentException e) {
      throw new InvalidEndpointRequestException(
          "Invalid idempotency key: " + e.getMessage(), "invalid key");
    }
  }

  private static Map<String, Object> describe(IdempotencyRecord record) {
    Map<String, Object> answer = new LinkedHashMap<>();
    answer.put("state", record.state().name());
    answer.put("attempt", record.attempt());
    answer.put("createdAt", record.createdAt().toString());
    if (record.completedAt() != null) {
      answer.put("completedAt", record.completedAt().toString());
    }
    answer.put("leaseExpiresAt", record.leaseExpiresAt().toString());
    answer.put("expiresAt", record.expiresAt().toString());
    return answer;
  }
}
