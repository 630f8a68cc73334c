package dev.idempotency.spring.actuate;

import dev.idempotency.KeyStoreException;
import dev.idempotency.UnreadableRecordException;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.boot.actuate.endpoint.annotation.DeleteOperation;
import org.springframework.boot.actuate.endpoint.annotation.ReadOperation;
import org.springframework.boot.actuate.endpoint.web.WebEndpointResponse;
import org.springframework.boot.actuate.endpoint.web.annotation.EndpointWebExtension;

/**
 * The {@link IdempotencyEndpoint} over HTTP: the same operations, with the status codes a client
 * expects: {@code 404} for a key the store holds no record of, and {@code 503} while the store
 * cannot answer (an outage is not a server error: the guard logs it, once per outage, and the
 * endpoint adds no ERROR and no stack trace). A record the store holds but cannot read ({@link
 * UnreadableRecordException}) is {@code 500}, with one WARN line naming no key: the store answered,
 * so it is not an outage. Its access is the endpoint's: read-only unless {@code
 * management.endpoint.idempotency.access=unrestricted}.
 */
@EndpointWebExtension(endpoint = IdempotencyEndpoint.class)
public final class IdempotencyEndpointWebExtension {

  private static final Logger log = LoggerFactory.getLogger(IdempotencyEndpointWebExtension.class);

  private final IdempotencyEndpoint endpoint;

  /**
   * Creates the extension.
   *
   * @param endpoint the endpoint it answers for
   */
  public IdempotencyEndpointWebExtension(IdempotencyEndpoint endpoint) {
    this.endpoint = Objects.requireNonNull(endpoint, "endpoint must not be null");
  }

  /**
   * A key's record: {@code 200}, {@code 404} if the store holds none, {@code 503} while it cannot
   * answer, {@code 500} if it holds one that it cannot read.
   *
   * @param key the idempotency key
   * @return the answer
   */
  @ReadOperation
  public WebEndpointResponse<Map<String, Object>> find(String key) {
    return answer(() -> endpoint.find(key));
  }

  /**
   * Forgets a completed or failed key: {@code 200} with whether it was forgotten, {@code 503} while
   * the store cannot answer, {@code 500} if it holds a record for the key that it cannot read.
   *
   * @param key the idempotency key
   * @return the answer
   */
  @DeleteOperation
  public WebEndpointResponse<Map<String, Object>> forget(String key) {
    return answer(() -> endpoint.forget(key));
  }

  private static WebEndpointResponse<Map<String, Object>> answer(
      Supplier<@Nullable Map<String, Object>> operation) {
    Map<String, Object> body;
    try {
      body = operation.get();
    } catch (UnreadableRecordException e) {
      log.warn("The idempotency store holds a record it cannot read: {}", e.getMessage());
      Map<String, Object> unreadable = new LinkedHashMap<>();
      unreadable.put(
          "error", "the idempotency store holds a record for this key that it cannot read");
      return new WebEndpointResponse<>(
          unreadable, WebEndpointResponse.STATUS_INTERNAL_SERVER_ERROR);
    } catch (KeyStoreException e) {
      log.debug("The idempotency store is unavailable; the Actuator endpoint answers 503", e);
      Map<String, Object> unavailable = new LinkedHashMap<>();
      unavailable.put("error", "the idempotency store is unavailable; try again later");
      return new WebEndpointResponse<>(unavailable, WebEndpointResponse.STATUS_SERVICE_UNAVAILABLE);
    }
    return body == null
        ? new WebEndpointResponse<>(WebEndpointResponse.STATUS_NOT_FOUND)
        : new WebEndpointResponse<>(body, WebEndpointResponse.STATUS_OK);
  }
}
