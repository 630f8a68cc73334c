package dev.idempotency.spring.web;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Makes a Spring MVC handler method idempotent with the IETF {@code Idempotency-Key} request header
 * (draft-ietf-httpapi-idempotency-key-header):
 *
 * <ul>
 *   <li>the header's value is the key, scoped to the endpoint (HTTP method and path pattern) and,
 *       when the request is authenticated, to its user: two endpoints, or two users, never share a
 *       record;
 *   <li>the request (its path, query and body) is the fingerprint; a JSON body counts by its
 *       canonical form (RFC 8785), so key order and number spelling do not matter;
 *   <li>the first response (status, body, {@code Content-Type}, {@code Location} and the headers
 *       listed in {@link #headers()}) is stored when its status is 2xx or 4xx, and a repeat gets it
 *       byte for byte with {@code Idempotent-Replayed: true}, the handler not running again; a 5xx
 *       or an exception releases the key, so a retry runs the handler again;
 *   <li>errors are RFC 9457 {@code application/problem+json}: a missing ({@link #required()}) or
 *       malformed key {@code 400}, a body over {@code idempotency.http.max-body-size} {@code 413},
 *       a repeat while the first is still running {@code 409} with {@code Retry-After}, the same
 *       key with another request {@code 422}, the store unavailable {@code 503} (nothing ran).
 * </ul>
 *
 * <p>The handler must answer synchronously (not with {@code DeferredResult} or a {@code Callable}).
 */
@Target(ElementType.METHOD)
@Retention(RetentionPolicy.RUNTIME)
@Documented
public @interface IdempotentEndpoint {

  /**
   * The window, an ISO-8601 duration such as {@code PT24H}; default {@code
   * idempotency.default-ttl}.
   *
   * @return the ttl, or empty for the default
   */
  String ttl() default "";

  /**
   * Whether a request without the header is refused with {@code 400}; if not, it runs without
   * idempotency. Default {@code true}.
   *
   * @return whether the header is required
   */
  boolean required() default true;

  /**
   * Response headers to store and replay besides {@code Content-Type} and {@code Location}.
   *
   * @return the header names
   */
  String[] headers() default {};
}
