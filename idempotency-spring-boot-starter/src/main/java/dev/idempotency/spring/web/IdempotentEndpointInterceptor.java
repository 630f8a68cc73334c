package dev.idempotency.spring.web;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.IdempotencyRequest;
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
import java.util.ArrayList;
import java.util.Enumeration;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.context.SmartLifecycle;
import org.springframework.web.context.request.ServletWebRequest;
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
 *
 * <p>As a lifecycle bean it follows the claimed requests whose async work runs ({@code Callable},
 * {@code WebAsyncTask}, {@code CompletionStage}, {@code DeferredResult}): their outcome is written
 * when the result is dispatched back to the server, which no longer happens once the server has
 * stopped (a request that outlived Spring Boot's graceful shutdown phase). When it stops ({@link
 * #SHUTDOWN_PHASE}: after the web server, just before the starter closes the guard) it hands each
 * such request to its result, as a container async timeout does: the result is rendered as Spring
 * MVC would have rendered it and recorded when it comes (or at once, if it came and waited for its
 * dispatch), within the guard's close grace period; work still queued in Spring MVC's async
 * executor (a {@code Callable}'s, a {@code StreamingResponseBody}'s), which Spring MVC would now
 * never run, is taken over and run by the starter, its key claimed, within that grace period. A
 * stream whose work began (an emitter, a running {@code StreamingResponseBody}, a response streamed
 * in part) may still send: it is recorded as answered without its body, and a retry gets {@code 422
 * response-not-stored}; a running {@code StreamingResponseBody} that wrote nothing yet is decided
 * at its end instead (its own failure releases its key), or shortly before the guard's close grace
 * runs out if it has not ended by then.
 */
public final class IdempotentEndpointInterceptor
    implements AsyncHandlerInterceptor, SmartLifecycle {

  /** The header that marks a replayed response. */
  public static final String REPLAYED_HEADER = "Idempotent-Replayed";

  /**
   * The lifecycle phase in which it stops: below the web server's stop ({@code
   * SmartLifecycle.DEFAULT_PHASE - 2048} on Spring Boot 3.5 and 4.0), just above the starter's
   * close of the guard ({@code SmartLifecycle.DEFAULT_PHASE - 4096}), which waits for the results.
   */
  public static final int SHUTDOWN_PHASE = SmartLifecycle.DEFAULT_PHASE - 4095;

  private static final Logger log = LoggerFactory.getLogger(IdempotentEndpointInterceptor.class);

  /** How long before the guard's close grace runs out an unended stream is recorded at most. */
  private static final Duration GRACE_MARGIN = Duration.ofSeconds(1);

  private final IdempotencyGuard guard;
  private final IdempotentEndpoints endpoints;
  private final IdempotencyKeyScope scope;
  private final Supplier<@Nullable JsonCodecs> json;
  private final String headerName;
  private final int minKeyLength;
  private final long maxBodyBytes;
  private final Duration maxWait;
  private final Set<Method> warnedUnfollowed = ConcurrentHashMap.newKeySet();
  private final Map<EndpointCall, LateResponse> asyncCalls = new ConcurrentHashMap<>();
  private volatile boolean running;

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
    if (request.getDispatcherType() == DispatcherType.ASYNC
        && request.getAttribute(EndpointCall.ATTRIBUTE) instanceof EndpointCall
        && WebAsyncUtils.getAsyncManager(request).getCallableInterceptor(AsyncTimeouts.KEY)
            instanceof AsyncTimeouts timeouts) {
      ServletWebRequest asyncDispatch = new ServletWebRequest(request, response);
      if (timeouts.answerRejectedWork(asyncDispatch)) {
        return false; // its work was refused by its executor and taken over: answered 409
      }
      if (timeouts.answerTakenOverTask(asyncDispatch, WebAsyncUtils.getAsyncManager(request))) {
        return false; // its work was taken over at its timeout, Spring MVC's task refused: 409
      }
      if (timeouts.answerDetachedOutcome(asyncDispatch, WebAsyncUtils.getAsyncManager(request))) {
        return false; // its detached work's outcome, which the starter follows, raced the timeout
      }
      // an async interceptor's failure (a Callable's, a DeferredResult's or a CompletionStage's)
      // dispatched in place of the work's outcome: the work's outcome is recorded, and Spring MVC
      // answers the client as it is
      timeouts.outcomeReplaced(asyncDispatch, WebAsyncUtils.getAsyncManager(request));
    }
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
    Object pattern = request.getAttribute(HandlerMapping.BEST_MATCHING_PATTERN_ATTRIBUTE);
    String path = pattern != null ? pattern.toString() : request.getRequestURI();
    EndpointKeys.Checked checked =
        EndpointKeys.check(
            headerName,
            fields(request),
            endpoint.required(),
            request.getMethod(),
            path,
            Objects.toString(scope.scopeOf(request), ""),
            minKeyLength);
    String scoped;
    if (checked instanceof EndpointKeys.Key key) {
      scoped = key.scoped();
    } else if (checked instanceof EndpointKeys.Refused refused) {
      Problems.write(response, refused.problem());
      return false;
    } else {
      return true; // no key, and none required: not guarded
    }
    String fingerprint;
    try {
      fingerprint = RequestFingerprint.of(request, body, maxBodyBytes, json.get());
    } catch (RequestFingerprint.BodyTooLarge e) {
      Problems.write(response, EndpointProblem.bodyTooLarge(maxBodyBytes));
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
    endpointCall.asyncWork().streamEnd().boundEmitterEnds(this::beforeTheGraceRunsOut);
    request.setAttribute(EndpointCall.ATTRIBUTE, endpointCall);
    endpointCall.request(body);
    AsyncTimeouts timeouts =
        new AsyncTimeouts(
            endpointCall, method, headerName, warnedUnfollowed, this::beforeTheGraceRunsOut);
    WebAsyncManager async = WebAsyncUtils.getAsyncManager(request);
    async.registerCallableInterceptor(AsyncTimeouts.KEY, timeouts);
    async.registerDeferredResultInterceptor(AsyncTimeouts.KEY, timeouts);
    request.setAttribute(IdempotentEndpointFilter.SEND_CONTEXT_ATTRIBUTE, call.context());
    endpointCall.capture(capture);
    endpointCall.enterMdc();
    return true;
  }

  /** The fields (header lines) that carry the key, in order; one field without a list. */
  private List<String> fields(HttpServletRequest request) {
    Enumeration<String> values = request.getHeaders(headerName);
    if (values == null || !values.hasMoreElements()) {
      return List.of();
    }
    String first = values.nextElement();
    if (!values.hasMoreElements()) {
      return List.of(first);
    }
    List<String> fields = new ArrayList<>();
    fields.add(first);
    while (values.hasMoreElements()) {
      fields.add(values.nextElement());
    }
    return fields;
  }

  /**
   * The handler's async work runs: the request, as it went async, is kept until the call's outcome
   * is known, in case the server stops before its dispatch comes ({@link #stop()}).
   */
  @Override
  public void afterConcurrentHandlingStarted(
      HttpServletRequest request, HttpServletResponse response, Object handler) {
    leaveMdc(request);
    if (request.getAttribute(EndpointCall.ATTRIBUTE) instanceof EndpointCall started) {
      started
          .asyncWork()
          .streamEnd()
          .asyncStarted(); // the handler's own emitter is observed from now on
    }
    CapturingResponse capture = WebUtils.getNativeResponse(response, CapturingResponse.class);
    if (request.getAttribute(EndpointCall.ATTRIBUTE) instanceof EndpointCall call
        && handler instanceof HandlerMethod method
        && capture != null
        && !call.reported()
        && !asyncCalls.containsKey(call)) {
      asyncCalls.put(call, LateResponse.of(request, capture, method, capture.limit()));
      call.whenOutcomeKnown(() -> asyncCalls.remove(call));
    }
    takeOverRejectedWork(request, response);
  }

  /**
   * The executor that was to run the work (Spring MVC's, or a {@code WebAsyncTask}'s own) refused
   * its task: Spring MVC set the refusal as the async result, to be dispatched once this thread
   * returns to the container. Work still queued (it never began) is taken over by the starter, as
   * at a timeout ({@link AsyncTimeouts#workRejected}): releasing its key would run the handler
   * method again on the retry, a second send if it sent before it returned the work. Asked after
   * the call was kept for a shutdown ({@link #stop()}), which then finds it taken over.
   */
  private static void takeOverRejectedWork(
      HttpServletRequest request, HttpServletResponse response) {
    if (!(request.getAttribute(EndpointCall.ATTRIBUTE) instanceof EndpointCall)) {
      return;
    }
    WebAsyncManager async = WebAsyncUtils.getAsyncManager(request);
    if (async.hasConcurrentResult()
        && async.getConcurrentResult() instanceof RejectedExecutionException
        && async.getCallableInterceptor(AsyncTimeouts.KEY) instanceof AsyncTimeouts timeouts) {
      timeouts.workRejected(new ServletWebRequest(request, response));
    }
  }

  /** Nothing to start: requests are claimed as they come. */
  @Override
  public void start() {
    running = true;
  }

  /**
   * The web server has stopped: each claimed request whose async work still runs will get no
   * dispatch, so its result is recorded from the result itself ({@link EndpointCall#dispatchLost}).
   */
  @Override
  public void stop() {
    running = false;
    for (Map.Entry<EndpointCall, LateResponse> async : asyncCalls.entrySet()) {
      try {
        async.getKey().dispatchLost(async.getValue(), this::beforeTheGraceRunsOut);
      } catch (RuntimeException e) {
        log.warn("An idempotent request's async result could not be recorded at shutdown", e);
      }
    }
  }

  /**
   * Runs {@code task} shortly before the guard's close grace, counted from now, runs out ({@link
   * #GRACE_MARGIN} before it, or half way through a shorter one): a stream whose outcome waits for
   * its end is recorded then if it has not ended, while the guard still writes outcomes (at a
   * shutdown the grace begins as {@link #stop()} returns; after a timeout that cut an emitter
   * short, it bounds the wait for the emitter's end).
   */
  private void beforeTheGraceRunsOut(Runnable task) {
    Duration grace = guard.closeGracePeriod();
    Duration half = grace.dividedBy(2);
    long delayMillis =
        grace.minus(half.compareTo(GRACE_MARGIN) < 0 ? half : GRACE_MARGIN).toMillis();
    Runnable guarded =
        () -> {
          try {
            task.run();
          } catch (RuntimeException e) {
            log.warn("An idempotent request's stream could not be recorded at shutdown", e);
          }
        };
    if (delayMillis <= 0) {
      guarded.run();
    } else {
      CompletableFuture.delayedExecutor(delayMillis, TimeUnit.MILLISECONDS).execute(guarded);
    }
  }

  @Override
  public boolean isRunning() {
    return running;
  }

  @Override
  public int getPhase() {
    return SHUTDOWN_PHASE;
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
      CompletableFuture<Outcome<StoredResponse>> outcome, HttpServletResponse response)
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
      Problems.write(
          response, EndpointProblem.notStored(headerName, stored != null ? stored.status() : null));
      return;
    }
    stored.replayTo(response, REPLAYED_HEADER);
  }

  private void refused(Throwable error, HttpServletResponse response) throws IOException {
    EndpointProblem problem = EndpointProblem.refusal(error, headerName);
    if (problem == null) {
      if (error instanceof RuntimeException runtime) {
        throw runtime;
      } else if (error instanceof IOException io) {
        throw io;
      }
      throw new IllegalStateException(error);
    }
    if (error instanceof KeyStoreException) {
      // the guard logs one WARN per outage; one line per refused request would drown it
      log.debug(
          "The idempotency store is unavailable; answering 503, the handler did not run", error);
    }
    Problems.write(response, problem);
  }
}
