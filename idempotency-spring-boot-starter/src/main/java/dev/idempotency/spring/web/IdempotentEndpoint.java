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
 *   <li>the header's value is the key, scoped to the endpoint (HTTP method and path pattern) and to
 *       the client as the application knows it ({@link IdempotencyKeyScope}: by default the
 *       authenticated user): two endpoints, or two clients, never share a record. A key shorter
 *       than {@code idempotency.http.min-key-length} (16), or too long once scoped, is refused;
 *   <li>the request (its path, query and body) is the fingerprint: a JSON body by its canonical
 *       form (key order and number spelling do not matter, every digit of a number does), a form by
 *       its parameters, a multipart body by its parts, anything else by its bytes;
 *   <li>the response is stored once the handler method has started (a request refused by binding or
 *       validation before it ran stores nothing), when its status is 2xx, 3xx, or 4xx other than
 *       408, 409, 425 and 429; a repeat gets it byte for byte (status, body, {@code Content-Type},
 *       {@code Location} and the headers listed in {@link #headers()}) with {@code
 *       Idempotent-Replayed: true}, the handler not running again. Error bodies that Spring writes
 *       through {@code sendError} and the error page ({@code ResponseStatusException},
 *       {@code @ResponseStatus}) are stored as the client got them;
 *   <li>a 5xx (an exception that nothing maps to a 4xx is one), or a 408, 409, 425 or 429, releases
 *       the key, so a retry runs the handler again;
 *   <li>an async handler ({@code Callable}, {@code DeferredResult}, {@code CompletableFuture},
 *       {@code WebAsyncTask}) is guarded as a synchronous one: its response is stored when the
 *       async result has been written;
 *   <li>a container async timeout ends the request, not the send: the client gets {@code 409} with
 *       {@code Retry-After} (or a {@code WebAsyncTask}'s own {@code onTimeout} answer), the key
 *       stays claimed, and the result is stored when the work ends. A {@code Callable}'s work is
 *       not interrupted by Spring's cancel at the timeout; a late failure that maps to a kept 4xx
 *       ({@code ResponseStatusException(404)}) is stored, a 5xx releases. An application's own
 *       {@code DeferredResult} too: the guard answers its timeout, and the value set later is
 *       stored (its own timeout callback and timeout result are not used);
 *   <li>a response larger than {@code idempotency.http.max-response-size} reaches the first client
 *       whole but is not stored: a repeat gets {@code 422} ({@code /problems/response-not-stored},
 *       no {@code Retry-After}), the handler not running again. No more than that size is held
 *       back: past it the body goes to the client as it comes. On Spring WebFlux a stream written
 *       element by element (server-sent events, NDJSON) is never held back: it reaches the client
 *       as it comes, its key claimed until it ends, and is stored if it ends within that size;
 *   <li>errors are RFC 9457 {@code application/problem+json}: a missing ({@link #required()}),
 *       malformed, too short or too long key {@code 400}, a body over {@code
 *       idempotency.http.max-body-size} {@code 413}, a repeat while the first is still running
 *       {@code 409} with {@code Retry-After}, the same key with another request {@code 422}, the
 *       store unavailable {@code 503} (nothing ran).
 * </ul>
 *
 * <p>Mistakes visible at startup fail the application, on Spring MVC and on Spring WebFlux alike: a
 * ttl that is not a duration or not longer than the lease, a name that is not an operation name,
 * {@code Set-Cookie} in {@link #headers()}, a {@code SendContext} parameter on a handler without
 * this annotation; on Spring MVC also a handler method that Spring AOP cannot advise (final) and a
 * reactive return type or a subclass of {@code DeferredResult} (WebFlux needs neither check: its
 * endpoint is a web filter, and reactive types are its own).
 */
@Target(ElementType.METHOD)
@Retention(RetentionPolicy.RUNTIME)
@Documented
public @interface IdempotentEndpoint {

  /**
   * The window, in Spring Boot's duration formats ({@code PT24H}, {@code 24h}); default {@code
   * idempotency.default-ttl}.
   *
   * @return the ttl, or empty for the default
   */
  String ttl() default "";

  /**
   * Whether a request without the header is refused with {@code 400}; if not, it runs without
   * idempotency (a {@code SendContext} parameter is then {@code null}). Default {@code true}.
   *
   * @return whether the header is required
   */
  boolean required() default true;

  /**
   * Response headers to store and replay besides {@code Content-Type} and {@code Location}; never
   * {@code Set-Cookie}.
   *
   * @return the header names
   */
  String[] headers() default {};

  /**
   * The operation's name in events and metrics (the {@code operation} tag), 1 to 64 characters of
   * {@code [A-Za-z0-9_.-]}. Default: {@code http.} with the HTTP method and the path pattern
   * ({@code http.POST_notify}). It does not change the key.
   *
   * @return the name, or empty for the default
   */
  String name() default "";
}
