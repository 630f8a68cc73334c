package dev.idempotency.spring.web;

import dev.idempotency.IdempotencyKey;
import dev.idempotency.IdempotencyKeyHeader;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Pattern;
import org.jspecify.annotations.Nullable;
import org.springframework.core.MethodParameter;
import org.springframework.http.HttpStatus;

/**
 * The {@code Idempotency-Key} header of an {@link IdempotentEndpoint} request, checked and scoped
 * to the endpoint and the client, free of either web stack's types: one set of rules for the Spring
 * MVC {@link IdempotentEndpointInterceptor} and the Spring WebFlux {@link
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
    String prefix = scopePrefix(method, path, client);
    int longest = longestKey(prefix);
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
    String scoped = scoped(prefix, key);
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

  /**
   * What every scoped key of this endpoint and client starts with: {@link IdempotencyKey#of}'s
   * {@code ("http", method, path, client, key)} without the key, or {@code null} if no key fits
   * (the scope alone is too long, or not valid in a key). Built once per request: the limit and the
   * scoped key both come from it.
   */
  static @Nullable String scopePrefix(String method, String path, String client) {
    try {
      String shortest = IdempotencyKey.of("http", method, path, client, "k");
      return shortest.substring(0, shortest.length() - 1);
    } catch (IllegalArgumentException tooLong) {
      return null;
    }
  }

  /** The most characters a client's key may have under {@code prefix} (0 if none fits). */
  static int longestKey(@Nullable String prefix) {
    return prefix == null ? 0 : IdempotencyKey.MAX_LENGTH - prefix.length();
  }

  /**
   * The client's key scoped: exactly {@code IdempotencyKey.of("http", method, path, client, key)},
   * or {@code null} if that is longer than a key may be.
   *
   * @param prefix the endpoint's and client's {@link #scopePrefix}, not null
   * @param key a key as {@link IdempotencyKeyHeader#parse} returns it (valid on its own)
   */
  static @Nullable String scoped(@Nullable String prefix, String key) {
    if (prefix == null) {
      return null;
    }
    StringBuilder scoped = new StringBuilder(prefix.length() + key.length() + 8).append(prefix);
    for (int i = 0; i < key.length(); i++) {
      char c = key.charAt(i);
      if (c == IdempotencyKey.SEPARATOR || c == '\\') {
        scoped.append('\\'); // IdempotencyKey.of's escape, so that no two tuples collide
      }
      scoped.append(c);
    }
    return scoped.length() <= IdempotencyKey.MAX_LENGTH ? scoped.toString() : null;
  }

  /** Operation names by path pattern, then method: a few per application, kept once made. */
  private static final ConcurrentMap<String, ConcurrentMap<String, String>> OPERATIONS =
      new ConcurrentHashMap<>();

  /**
   * How many names {@link #OPERATIONS} keeps at most: a path that is not a pattern (a request
   * mapped without one) comes from the client, and must not grow it without bound.
   */
  private static final int MAX_KEPT_OPERATIONS = 1024;

  private static final AtomicInteger keptOperations = new AtomicInteger();

  /**
   * A low-cardinality operation name: the method and the path pattern, as a metrics tag allows.
   * Made once per pattern and method, not by a regular expression's replacement on every request
   * (issue 39).
   */
  static String operation(String method, String pattern) {
    ConcurrentMap<String, String> byMethod = OPERATIONS.get(pattern);
    String name = byMethod != null ? byMethod.get(method) : null;
    if (name != null) {
      return name;
    }
    name = operationName(method, pattern);
    if (keptOperations.get() < MAX_KEPT_OPERATIONS) {
      if (OPERATIONS
              .computeIfAbsent(pattern, p -> new ConcurrentHashMap<>(4))
              .putIfAbsent(method, name)
          == null) {
        keptOperations.incrementAndGet();
      }
    }
    return name;
  }

  private static String operationName(String method, String pattern) {
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
