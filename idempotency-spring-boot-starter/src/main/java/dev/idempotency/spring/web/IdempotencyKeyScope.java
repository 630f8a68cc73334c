package dev.idempotency.spring.web;

import jakarta.servlet.http.HttpServletRequest;
import java.security.Principal;
import org.jspecify.annotations.Nullable;

/**
 * Who a request comes from, as the application trusts it: the part of every {@link
 * IdempotentEndpoint} key that the client does not choose. Two clients that send the same {@code
 * Idempotency-Key} never share a record when their scopes differ, so one can neither read the
 * other's response nor block its request (the IETF draft's security considerations: "a unique
 * composite key ... combining the idempotency key sent by the client with other client specific
 * attributes known only to the resource server").
 *
 * <p>The default, {@link #principal()}, is the authenticated user's name. Define a bean of this
 * type to scope by what the application checks itself: the client id behind an API key, a tenant,
 * an OAuth client:
 *
 * <pre>{@code
 * @Bean
 * IdempotencyKeyScope idempotencyKeyScope(ApiKeys apiKeys) {
 *   return request -> apiKeys.clientIdOf(request.getHeader("X-Api-Key")); // never the secret itself
 * }
 * }</pre>
 *
 * <p>Return only what the application has verified (never a header the client may set freely), and
 * an identifier rather than a secret: the scope becomes part of the key, which is stored as a
 * digest unless raw keys are switched on for debugging. Called on the request's thread before the
 * handler runs; must be thread-safe.
 */
@FunctionalInterface
public interface IdempotencyKeyScope {

  /**
   * The scope of a request's key.
   *
   * @param request the request, after the filters that authenticate it
   * @return who the request comes from, or {@code null} (or empty) for an unknown client: all
   *     unknown clients share one scope, where the key length and the request fingerprint are the
   *     only protection
   */
  @Nullable String scopeOf(HttpServletRequest request);

  /**
   * The default scope: the name of the request's authenticated {@link Principal} (Spring Security
   * sets it), or none.
   *
   * @return the scope
   */
  static IdempotencyKeyScope principal() {
    return request -> {
      Principal user = request.getUserPrincipal();
      return user == null ? null : user.getName();
    };
  }
}
