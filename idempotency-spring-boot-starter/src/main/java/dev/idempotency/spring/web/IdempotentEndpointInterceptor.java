package dev.idempotency.spring.web;

import dev.idempotency.IdempotencyException;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.IdempotencyKeyHeader;
import dev.idempotency.IdempotencyKeyReuseException;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.IdempotencyResultUnavailableException;
import dev.idempotency.KeyStoreException;
import dev.idempotency.Outcome;
import dev.idempotency.spring.JsonCodecs;
import dev.idempotency.spring.PendingCall;
import jakarta.servlet.DispatcherType;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.Enumeration;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.http.HttpStatus;
import org.springframework.web.context.request.async.WebAsyncManager;
import org.springframework.web.context.request.async.WebAsyncUtils;
import org.springframework.web.method.HandlerMethod;
import org.springframework.web.servlet.AsyncHandlerInterceptor;
import org.springframework.web.servlet.HandlerMapping;
import org.springframework.web.util.WebUtils;

/**
 * Where an {@link IdempotentEndpoint} request is claimed: once Spring MVC has chosen the handler
 * (so the endpoint, its path pattern and its annotation are known without looking them up again),
 * before the arguments are bound. It reads and checks the key, scopes it to the endpoint and the
 * client ({@link IdempotencyKeyScope}), fingerprints the request, and asks the guard: a repeat is
 * answered here from the store (the handler does not run), a refusal as a problem; a claim lets the
 * handler run, its response held back by the {@link IdempotentEndpointFilter}, which stores it when
 * it is final. The Spring Boot auto-configuration registers it after the application's own
 * interceptors. Thread-safe.
 */
public final class IdempotentEndpointInterceptor implements AsyncHandlerInterceptor {

  /** The header that marks a replayed response. */
  public static final String REPLAYED_HEADER = "Idempotent-Replayed";

  private static final Logger log = LoggerFactory.getLogger(IdempotentEndpointInterceptor.class);

  private final IdempotencyGuard guard;
  private final IdempotentEndpoints endpoints;
  private final IdempotencyKeyScope scope;
  private final Supplier<@Nullable JsonCodecs> json;
  private final String headerName;
  private final int minKeyLength;
  private final long maxBodyBytes;
  private final Duration maxWait;
  private final Set<Method> warnedUnfollowed = ConcurrentHashMap.newKeySet();

  /**
   * Creates the interceptor.
   *
   * @param guard the guard
   * @param endpoints the annotated handler methods
   * @param scope who a request comes from, as the application trusts it
   * @param json the application's JSON mapper, for fingerprints of JSON bodies; may supply null
   * @param headerName the request header that carries the key, normally {@code Idempotency-Key}
   * @param minKeyLength the shortest key accepted
   * @param maxBodyBytes the largest body read for the fingerprint; a larger one is refused (413)
   * @param maxWait how long a request waits for the guard's answer (the in-flight wait and more)
   */
  public IdempotentEndpointInterceptor(
      IdempotencyGuard guard,
      IdempotentEndpoints endpoints,
      IdempotencyKeyScope scope,
      Supplier<@Nullable JsonCodecs> json,
      String headerName,
      int minKeyLength,
      long maxBodyBytes,
      Duration maxWait) {
    this.guard = Objects.requireNonNull(guard, "guard must not be null");
    this.endpoints = Objects.requireNonNull(endpoints, "endpoints must not be null");
    this.scope = Objects.requireNonNull(scope, "scope must not be null");
    this.json = Objects.requireNonNull(json, "json must not be null");
    this.headerName = Objects.requireNonNull(headerName, "headerName must not be null");
    if (minKeyLength < 1 || minKeyLength > IdempotencyKey.MAX_LENGTH) {
      throw new IllegalArgumentException(
          "minKeyLength must be 1 to " + IdempotencyKey.MAX_LENGTH + ", was " + minKeyLength);
    }
    this.minKeyLength = minKeyLength;
    if (maxBodyBytes < 0) {
      throw new IllegalArgumentException("maxBodyBytes must not be negative");
    }
    this.maxBodyBytes = maxBodyBytes;
    this.maxWait = Objects.requireNonNull(maxWait, "maxWait must not be null");
  }

  @Override
  public boolean preHandle(HttpServletRequest request, HttpServletResponse response, Object handler)
      throws IOException, ServletException {
    if (!(handler instanceof HandlerMethod method)
        || request.getDispatcherType() != DispatcherType.REQUEST
        || request.getAttribute(EndpointCall.ATTRIBUTE) != null) {
      return true; // not an endpoint, or a later dispatch of one already claimed
    }
    IdempotentEndpoints.Endpoint endpoint = endpoints.find(method);
    if (endpoint == null) {
      return true;
    }
    CapturingResponse capture = WebUtils.getNativeResponse(response, CapturingResponse.class);
    BodyCachingRequest body = WebUtils.getNativeRequest(request, BodyCachingRequest.class);
    if (capture == null || body == null) {
      throw new IllegalStateException(
          endpoint.where()
              + " is called without the IdempotentEndpointFilter in the filter chain; register"
              + " it (the auto-configuration does) or add it to MockMvc");
    }
    String header = request.getHeader(headerName);
    if (header == null) {
      if (!endpoint.required()) {
        return true;
      }
      Problems.write(
          response,
          HttpStatus.BAD_REQUEST,
          "missing-key",
          "the " + headerName + " header is required");
      return false;
    }
    if (fields(request) > 1) {
      Problems.write(
          response,
          HttpStatus.BAD_REQUEST,
          "malformed-key",
          "the request has more than one " + headerName + " field; send one key, in one field");
      return false;
    }
    Object pattern = request.getAttribute(HandlerMapping.BEST_MATCHING_PATTERN_ATTRIBUTE);
    String path = pattern != null ? pattern.toString() : request.getRequestURI();
    String client = Objects.toString(scope.scopeOf(request), "");
    String prefix = EndpointKeys.scopePrefix(request.getMethod(), path, client);
    int longest = EndpointKeys.longestKey(prefix);
    String key;
    try {
      key = IdempotencyKeyHeader.parse(headerName, header, Math.max(1, longest));
    } catch (IdempotencyKeyHeader.TooLongException e) {
      tooLong(response, longest);
      return false;
    } catch (IllegalArgumentException e) {
      Problems.write(response, HttpStatus.BAD_REQUEST, "malformed-key", e.getMessage());
      return false;
    }
    if (key.length() > longest) {
      tooLong(response, longest); // the scope alone is too long: no key fits
      return false;
    }
    if (key.length() < minKeyLength) {
      Problems.write(
          response,
          HttpStatus.BAD_REQUEST,
          "key-too-short",
          "the "
              + headerName
              + " must have at least "
              + minKeyLength
              + " characters; send a random one, such as a UUID",
          Map.of("min-length", minKeyLength));
      return false;
    }
    String scoped = EndpointKeys.scoped(prefix, key);
    if (scoped == null) {
      tooLong(response, longest);
      return false;
    }
    String fingerprint;
    try {
      fingerprint = RequestFingerprint.of(request, body, maxBodyBytes, json.get());
    } catch (RequestFingerprint.BodyTooLarge e) {
      Problems.write(
          response,
          HttpStatus.PAYLOAD_TOO_LARGE,
          "body-too-large",
          "the request body is larger than " + maxBodyBytes + " bytes");
      return false;
    }
    IdempotencyRequest idempotency =
        IdempotencyRequest.of(scoped, endpoint.ttl())
            .withFingerprint(fingerprint)
            .withOperation(
                endpoint.name() != null
                    ? endpoint.name()
                    : EndpointKeys.operation(request.getMethod(), path));
    PendingCall<StoredResponse> call =
        PendingCall.claim(guard, idempotency, StoredResponse.CODEC, maxWait);
    if (!call.claimed()) {
      answer(call.outcome(), response);
      return false;
    }
    EndpointCall endpointCall = new EndpointCall(call, endpoint.headers(), maxWait);
    request.setAttribute(EndpointCall.ATTRIBUTE, endpointCall);
    AsyncTimeouts timeouts = new AsyncTimeouts(endpointCall, method, headerName, warnedUnfollowed);
    WebAsyncManager async = WebAsyncUtils.getAsyncManager(request);
    async.registerCallableInterceptor(AsyncTimeouts.KEY, timeouts);
    async.registerDeferredResultInterceptor(AsyncTimeouts.KEY, timeouts);
    request.setAttribute(IdempotentEndpointFilter.SEND_CONTEXT_ATTRIBUTE, call.context());
    endpointCall.capture(capture);
    endpointCall.enterMdc();
    return true;
  }

  /** How many fields (header lines) carry the key. */
  private int fields(HttpServletRequest request) {
    int fields = 0;
    Enumeration<String> values = request.getHeaders(headerName);
    while (values != null && values.hasMoreElements()) {
      values.nextElement();
      fields++;
    }
    return fields;
  }

  private void tooLong(HttpServletResponse response, int longest) throws IOException {
    Problems.write(
        response,
        HttpStatus.BAD_REQUEST,
        "key-too-long",
        "the " + headerName + " is too long for this endpoint: at most " + longest + " characters",
        Map.of("max-length", longest));
  }

  @Override
  public void afterConcurrentHandlingStarted(
      HttpServletRequest request, HttpServletResponse response, Object handler) {
    leaveMdc(request);
  }

  @Override
  public void afterCompletion(
      HttpServletRequest request,
      HttpServletResponse response,
      Object handler,
      @Nullable Exception ex) {
    leaveMdc(request);
  }

  private static void leaveMdc(HttpServletRequest request) {
    if (request.getAttribute(EndpointCall.ATTRIBUTE) instanceof EndpointCall call) {
      call.leaveMdc();
    }
  }

  /** Answers a request that was not claimed: a replay, or the reason it was refused. */
  private void answer(
      java.util.concurrent.CompletableFuture<Outcome<StoredResponse>> outcome,
      HttpServletResponse response)
      throws IOException {
    Outcome<StoredResponse> replay;
    try {
      replay = outcome.join();
    } catch (RuntimeException e) {
      refused(PendingCall.unwrap(e), response);
      return;
    }
    StoredResponse stored = replay.value();
    if (stored == null || !stored.bodyStored()) {
      notStored(response, stored);
      return;
    }
    stored.replayTo(response, REPLAYED_HEADER);
  }

  private void refused(Throwable error, HttpServletResponse response) throws IOException {
    if (error instanceof IdempotencyInProgressException) {
      response.setHeader("Retry-After", "1");
      Problems.write(
          response,
          HttpStatus.CONFLICT,
          "request-in-progress",
          "a request with this " + headerName + " is still being processed; retry later");
    } else if (error instanceof IdempotencyKeyReuseException) {
      Problems.write(
          response,
          HttpStatus.UNPROCESSABLE_ENTITY,
          "key-reused",
          "this " + headerName + " was already used with a different request");
    } else if (error instanceof IdempotencyResultUnavailableException) {
      notStored(response, null);
    } else if (error instanceof KeyStoreException) {
      // the guard logs one WARN per outage; one line per refused request would drown it
      log.debug(
          "The idempotency store is unavailable; answering 503, the handler did not run", error);
      response.setHeader("Retry-After", "5");
      Problems.write(
          response,
          HttpStatus.SERVICE_UNAVAILABLE,
          "store-unavailable",
          "the idempotency store is unavailable; nothing was done");
    } else if (error instanceof IdempotencyException) {
      Problems.write(
          response,
          HttpStatus.INTERNAL_SERVER_ERROR,
          "idempotency",
          "the first response to this "
              + headerName
              + " cannot be repeated ("
              + error.getClass().getSimpleName()
              + ")");
    } else if (error instanceof RuntimeException runtime) {
      throw runtime;
    } else if (error instanceof IOException io) {
      throw io;
    } else {
      throw new IllegalStateException(error);
    }
  }

  /**
   * The first request with this key was processed, but its response could not be stored (larger
   * than the capture bound or the store's limit, or a stream cut short): a final, non-retryable
   * answer, so that clients do not retry in a loop; the handler does not run again.
   */
  private void notStored(HttpServletResponse response, @Nullable StoredResponse stored)
      throws IOException {
    String detail =
        "a request with this "
            + headerName
            + " was already processed"
            + (stored != null ? " (status " + stored.status() + ")" : "")
            + ", but its response was not kept (too large to keep, or a stream cut short) and"
            + " cannot be repeated; it is not run again. Look its result up, or send a new"
            + " request with a new key";
    Problems.write(
        response,
        HttpStatus.UNPROCESSABLE_ENTITY,
        "response-not-stored",
        detail,
        stored != null ? Map.of("original-status", stored.status()) : Map.of());
  }
}
