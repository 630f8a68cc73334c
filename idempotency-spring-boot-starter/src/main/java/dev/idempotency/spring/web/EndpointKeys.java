package dev.idempotency.spring.web;

import dev.idempotency.IdempotencyKey;
import dev.idempotency.IdempotencyKeyHeader;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;
import org.jspecify.annotations.Nullable;
import org.springframework.core.MethodParameter;
import org.springframework.http.HttpStatus;

/**
 * The {@code Idempotency-Key} header of an {@link IdempotentEndpoint} request, checked and scoped
 * to the endpoint and the client, free of either web stack's types: the rules of the Spring MVC
 * {@link IdempotentEndpointInterceptor}, for the Spring WebFlux {@link
 * IdempotentEndpointWebFilter}.
 */
final class EndpointKeys {

  /** What {@link #operation} replaces: compiled once, not on every request. */
  private static final Pattern NOT_IN_OPERATION_NAMES = Pattern.compile("[^A-Za-z0-9_.-]");

  private EndpointKeys() {}

  /** A header checked: the scoped key, no key (not required), or the problem to answer with. */
  sealed interface Checked permits Key, Absent, Refused {}

  /**
   * The key as stored.
   *
   * @param scoped the client's key scoped to the endpoint and the client
   */
  record Key(String scoped) implements Checked {}

  /** No key, and the endpoint does not require one: the request runs unguarded. */
  record Absent() implements Checked {}

  /**
   * The problem to answer with; nothing runs.
   *
   * @param problem the problem
   */
  record Refused(EndpointProblem problem) implements Checked {}

  /**
   * Checks the header and scopes the key.
   *
   * @param headerName the header's name, for messages
   * @param fields the header's fields (lines), in order; empty if it is missing
   * @param required whether the endpoint requires a key
   * @param method the HTTP method
   * @param path the endpoint's path pattern
   * @param client who the request comes from, or empty
   * @param minKeyLength the shortest key accepted
   */
  static Checked check(
      String headerName,
      List<String> fields,
      boolean required,
      String method,
      String path,
      String client,
      int minKeyLength) {
    if (fields.isEmpty()) {
      return required ? new Refused(EndpointProblem.missingKey(headerName)) : new Absent();
    }
    if (fields.size() > 1) {
      return new Refused(
          new EndpointProblem(
              HttpStatus.BAD_REQUEST,
              "malformed-key",
              "the request has more than one "
                  + headerName
                  + " field; send one key, in one field"));
    }
    int longest = longestKey(method, path, client);
    String key;
    try {
      key = IdempotencyKeyHeader.parse(headerName, fields.get(0), Math.max(1, longest));
    } catch (IdempotencyKeyHeader.TooLongException e) {
      return tooLong(headerName, longest);
    } catch (IllegalArgumentException e) {
      return new Refused(
          new EndpointProblem(HttpStatus.BAD_REQUEST, "malformed-key", e.getMessage()));
    }
    if (key.length() > longest) {
      return tooLong(headerName, longest);
    }
    if (key.length() < minKeyLength) {
      return new Refused(
          new EndpointProblem(
              HttpStatus.BAD_REQUEST,
              "key-too-short",
              "the "
                  + headerName
                  + " must have at least "
                  + minKeyLength
                  + " characters; send a random one, such as a UUID",
              Map.of("min-length", minKeyLength),
              null));
    }
    String scoped = scope(method, path, client, key);
    return scoped != null ? new Key(scoped) : tooLong(headerName, longest);
  }

  private static Refused tooLong(String headerName, int longest) {
    return new Refused(
        new EndpointProblem(
            HttpStatus.BAD_REQUEST,
            "key-too-long",
            "the "
                + headerName
                + " is too long for this endpoint: at most "
                + longest
                + " characters",
            Map.of("max-length", longest),
            null));
  }

  /** The most characters a client's key may have on this endpoint, for this client. */
  private static int longestKey(String method, String path, String client) {
    String shortest = scope(method, path, client, "k");
    return shortest == null ? 0 : IdempotencyKey.MAX_LENGTH - (shortest.length() - "k".length());
  }

  /** The scoped key, or {@code null} if that is longer than a key may be. */
  private static @Nullable String scope(String method, String path, String client, String key) {
    try {
      return IdempotencyKey.of("http", method, path, client, key);
    } catch (IllegalArgumentException tooLong) {
      return null;
    }
  }

  /** A low-cardinality operation name: the method and the path pattern, as a metrics tag allows. */
  static String operation(String method, String pattern) {
    String name = NOT_IN_OPERATION_NAMES.matcher("http." + method + pattern).replaceAll("_");
    return name.length() <= 64 ? name : name.substring(0, 64);
  }

  /**
   * A handler's {@code SendContext} argument, on either web stack: the call's context, or null for
   * an endpoint whose key is optional called without one (not guarded).
   *
   * @throws IllegalStateException if the handler was called without a guarded call's context
   */
  static @Nullable Object sendContext(MethodParameter parameter, @Nullable Object context) {
    if (context == null) {
      IdempotentEndpoint endpoint = parameter.getMethodAnnotation(IdempotentEndpoint.class);
      if (endpoint != null && !endpoint.required()) {
        return null; // called without a key: not guarded
      }
      throw new IllegalStateException(
          parameter.getExecutable()
              + " takes a SendContext, which only @IdempotentEndpoint handlers called with an"
              + " Idempotency-Key get");
    }
    return context;
  }
}
