package dev.idempotency.spring.web;

import dev.idempotency.IdempotencyException;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.IdempotencyKeyHeader;
import dev.idempotency.IdempotencyKeyReuseException;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.KeyStoreException;
import dev.idempotency.Outcome;
import dev.idempotency.spring.JsonCodecs;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.security.Principal;
import java.time.Duration;
import java.time.format.DateTimeParseException;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.http.ProblemDetail;
import org.springframework.web.filter.OncePerRequestFilter;
import org.springframework.web.method.HandlerMethod;
import org.springframework.web.servlet.HandlerExecutionChain;
import org.springframework.web.servlet.HandlerMapping;
import org.springframework.web.util.ContentCachingResponseWrapper;
import org.springframework.web.util.ServletRequestPathUtils;

/**
 * The servlet filter behind {@link IdempotentEndpoint}: for a request whose handler method carries
 * the annotation, it reads the key and the body, runs the rest of the chain through the guard, and
 * stores or replays the response. Other requests pass through after one handler lookup.
 *
 * <p>It runs late in the filter chain (after authentication and the like), so that a response the
 * handler did not make (a 401 of a security filter) is never stored. The Spring Boot
 * auto-configuration registers it; it is thread-safe.
 */
public final class IdempotentEndpointFilter extends OncePerRequestFilter {

  /** The header that marks a replayed response. */
  public static final String REPLAYED_HEADER = "Idempotent-Replayed";

  /**
   * The request attribute that holds the call's {@link dev.idempotency.SendContext} while the
   * handler runs: its provider key is what to pass to the provider. A handler method can also
   * declare a {@code SendContext} parameter.
   */
  public static final String SEND_CONTEXT_ATTRIBUTE = "dev.idempotency.SendContext";

  private static final Logger log = LoggerFactory.getLogger(IdempotentEndpointFilter.class);

  private final IdempotencyGuard guard;
  private final Supplier<List<HandlerMapping>> handlerMappings;
  private final Supplier<JsonCodecs> json;
  private final String headerName;
  private final long maxBodyBytes;
  private final Supplier<Duration> defaultTtl;
  private final Map<java.lang.reflect.Method, Endpoint> endpoints = new ConcurrentHashMap<>();

  /**
   * Creates the filter.
   *
   * @param guard the guard
   * @param handlerMappings the application's handler mappings, looked up on the first request
   * @param json the application's JSON mapper, for fingerprints of JSON bodies; may supply null
   * @param headerName the request header that carries the key, normally {@code Idempotency-Key}
   * @param maxBodyBytes the largest body read; a larger one is refused with 413
   * @param defaultTtl the window of endpoints that name none
   */
  public IdempotentEndpointFilter(
      IdempotencyGuard guard,
      Supplier<List<HandlerMapping>> handlerMappings,
      Supplier<JsonCodecs> json,
      String headerName,
      long maxBodyBytes,
      Supplier<Duration> defaultTtl) {
    this.guard = Objects.requireNonNull(guard, "guard must not be null");
    this.handlerMappings = Objects.requireNonNull(handlerMappings, "handlerMappings");
    this.json = Objects.requireNonNull(json, "json");
    this.headerName = Objects.requireNonNull(headerName, "headerName");
    if (maxBodyBytes < 0) {
      throw new IllegalArgumentException("maxBodyBytes must not be negative");
    }
    this.maxBodyBytes = maxBodyBytes;
    this.defaultTtl = Objects.requireNonNull(defaultTtl, "defaultTtl");
  }

  /** An annotated handler method, as the filter runs it. */
  private record Endpoint(String pattern, Duration ttl, boolean required, List<String> headers) {}

  @Override
  protected void doFilterInternal(
      HttpServletRequest request, HttpServletResponse response, FilterChain chain)
      throws ServletException, IOException {
    Endpoint endpoint = endpointOf(request);
    if (endpoint == null) {
      chain.doFilter(request, response);
      return;
    }
    String header = request.getHeader(headerName);
    if (header == null) {
      if (endpoint.required()) {
        problem(
            response,
            HttpStatus.BAD_REQUEST,
            "missing-key",
            "the " + headerName + " header is required");
      } else {
        chain.doFilter(request, response);
      }
      return;
    }
    String key;
    try {
      key = IdempotencyKeyHeader.parse(headerName, header);
    } catch (IllegalArgumentException e) {
      problem(response, HttpStatus.BAD_REQUEST, "malformed-key", e.getMessage());
      return;
    }
    RequestBody body = RequestBody.read(request, maxBodyBytes);
    if (body == null) {
      problem(
          response,
          HttpStatus.PAYLOAD_TOO_LARGE,
          "body-too-large",
          "the request body is larger than " + maxBodyBytes + " bytes");
      return;
    }
    Principal user = request.getUserPrincipal();
    IdempotencyRequest idempotency =
        IdempotencyRequest.of(
                IdempotencyKey.of(
                    "http",
                    request.getMethod(),
                    endpoint.pattern(),
                    user == null ? "" : user.getName(),
                    key),
                endpoint.ttl() != null ? endpoint.ttl() : defaultTtl.get())
            .withFingerprint(body.fingerprint(request, json))
            .withOperation(operation(request.getMethod(), endpoint.pattern()));
    run(idempotency, endpoint, body.replayable(request), response, chain);
  }

  private void run(
      IdempotencyRequest idempotency,
      Endpoint endpoint,
      HttpServletRequest request,
      HttpServletResponse response,
      FilterChain chain)
      throws IOException, ServletException {
    ContentCachingResponseWrapper captured = new ContentCachingResponseWrapper(response);
    try {
      Outcome<StoredResponse> outcome =
          guard.executeForOutcome(
              idempotency,
              StoredResponse.CODEC,
              context -> {
                request.setAttribute(SEND_CONTEXT_ATTRIBUTE, context);
                return handle(request, captured, chain, endpoint);
              });
      if (outcome.replayed()) {
        outcome.value().replayTo(response, REPLAYED_HEADER);
      } else {
        captured.copyBodyToResponse();
      }
    } catch (NotStored e) {
      captured.copyBodyToResponse(); // a 5xx (or 1xx, 3xx) answered as it is; the key is released
    } catch (HandlerFailed e) {
      e.rethrow();
    } catch (IdempotencyInProgressException e) {
      response.setHeader("Retry-After", "1");
      problem(
          response,
          HttpStatus.CONFLICT,
          "request-in-progress",
          "a request with this " + headerName + " is still being processed; retry later");
    } catch (IdempotencyKeyReuseException e) {
      problem(
          response,
          HttpStatus.UNPROCESSABLE_ENTITY,
          "key-reused",
          "this " + headerName + " was already used with a different request");
    } catch (KeyStoreException e) {
      log.warn("The idempotency store is unavailable; answering 503, the handler did not run", e);
      response.setHeader("Retry-After", "5");
      problem(
          response,
          HttpStatus.SERVICE_UNAVAILABLE,
          "store-unavailable",
          "the idempotency store is unavailable; nothing was done");
    } catch (IdempotencyException e) {
      problem(
          response,
          HttpStatus.INTERNAL_SERVER_ERROR,
          "idempotency",
          "the first response to this "
              + headerName
              + " cannot be repeated ("
              + e.getClass().getSimpleName()
              + ")");
    }
  }

  /** The guarded part: the handler's response, stored if 2xx or 4xx, otherwise released. */
  private static StoredResponse handle(
      HttpServletRequest request,
      ContentCachingResponseWrapper response,
      FilterChain chain,
      Endpoint endpoint) {
    try {
      chain.doFilter(request, response);
    } catch (IOException | ServletException | RuntimeException | Error e) {
      throw new HandlerFailed(e);
    }
    if (request.isAsyncStarted()) {
      throw new HandlerFailed(
          new IllegalStateException(
              "an @IdempotentEndpoint handler must answer synchronously, not asynchronously"));
    }
    int status = response.getStatus();
    if (!(status >= 200 && status < 300) && !(status >= 400 && status < 500)) {
      throw new NotStored();
    }
    return StoredResponse.capture(response, response.getContentAsByteArray(), endpoint.headers());
  }

  /** The handler answered with a status that is not stored: release the key, answer as is. */
  private static final class NotStored extends RuntimeException {
    private static final long serialVersionUID = 1L;

    NotStored() {
      super(null, null, false, false);
    }
  }

  /** The chain threw: release the key and let the exception go on as it was. */
  private static final class HandlerFailed extends RuntimeException {
    private static final long serialVersionUID = 1L;

    HandlerFailed(Throwable cause) {
      super(null, cause, false, false);
    }

    void rethrow() throws IOException, ServletException {
      Throwable cause = getCause();
      if (cause instanceof IOException io) {
        throw io;
      }
      if (cause instanceof ServletException servlet) {
        throw servlet;
      }
      if (cause instanceof RuntimeException runtime) {
        throw runtime;
      }
      throw (Error) cause;
    }
  }

  // ---- the handler

  /** The annotated handler method the request goes to, or {@code null}. */
  private Endpoint endpointOf(HttpServletRequest request) {
    Object previousPath = request.getAttribute(ServletRequestPathUtils.PATH_ATTRIBUTE);
    ServletRequestPathUtils.parseAndCache(request);
    try {
      for (HandlerMapping mapping : handlerMappings.get()) {
        HandlerExecutionChain handler;
        try {
          handler = mapping.getHandler(request);
        } catch (Exception noMatch) {
          return null; // the dispatcher will answer it (405, 415, ...)
        }
        if (handler != null) {
          if (!(handler.getHandler() instanceof HandlerMethod method)) {
            return null;
          }
          IdempotentEndpoint annotation =
              AnnotatedElementUtils.findMergedAnnotation(
                  method.getMethod(), IdempotentEndpoint.class);
          if (annotation == null) {
            return null;
          }
          Object pattern = request.getAttribute(HandlerMapping.BEST_MATCHING_PATTERN_ATTRIBUTE);
          Endpoint shape =
              endpoints.computeIfAbsent(method.getMethod(), m -> endpoint(m, annotation));
          return new Endpoint(
              pattern != null ? pattern.toString() : request.getRequestURI(),
              shape.ttl(),
              shape.required(),
              shape.headers());
        }
      }
      return null;
    } finally {
      if (previousPath != null) {
        request.setAttribute(ServletRequestPathUtils.PATH_ATTRIBUTE, previousPath);
      } else {
        ServletRequestPathUtils.clearParsedRequestPath(request);
      }
    }
  }

  private static Endpoint endpoint(java.lang.reflect.Method method, IdempotentEndpoint annotation) {
    Duration ttl = null;
    if (!annotation.ttl().isEmpty()) {
      try {
        ttl = Duration.parse(annotation.ttl());
      } catch (DateTimeParseException e) {
        throw new IllegalStateException(
            "@IdempotentEndpoint on "
                + method
                + ": ttl '"
                + annotation.ttl()
                + "' is not an ISO-8601 duration such as PT24H",
            e);
      }
    }
    return new Endpoint("", ttl, annotation.required(), List.of(annotation.headers()));
  }

  /** A low-cardinality operation name: the method and the path pattern, as a metrics tag allows. */
  static String operation(String method, String pattern) {
    String name = ("http." + method + pattern).replaceAll("[^A-Za-z0-9_.-]", "_");
    return name.length() <= 64 ? name : name.substring(0, 64);
  }

  // ---- problems

  /** An RFC 9457 problem, as Spring's {@link ProblemDetail} describes it. */
  private static void problem(
      HttpServletResponse response, HttpStatus status, String type, String detail)
      throws IOException {
    ProblemDetail problem = ProblemDetail.forStatusAndDetail(status, detail);
    problem.setType(java.net.URI.create("/problems/" + type));
    String body =
        "{\"type\":"
            + quote(problem.getType().toString())
            + ",\"title\":"
            + quote(problem.getTitle())
            + ",\"status\":"
            + problem.getStatus()
            + ",\"detail\":"
            + quote(problem.getDetail())
            + "}";
    byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
    response.setStatus(status.value());
    response.setContentType(MediaType.APPLICATION_PROBLEM_JSON_VALUE);
    response.setContentLength(bytes.length);
    response.getOutputStream().write(bytes);
  }

  private static String quote(String text) {
    StringBuilder out = new StringBuilder("\"");
    for (char c : text.toCharArray()) {
      if (c == '"' || c == '\\') {
        out.append('\\').append(c);
      } else if (c < 0x20) {
        out.append(String.format("\\u%04x", (int) c));
      } else {
        out.append(c);
      }
    }
    return out.append('"').toString();
  }
}
