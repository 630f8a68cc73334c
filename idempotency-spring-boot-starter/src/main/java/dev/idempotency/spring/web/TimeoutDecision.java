package dev.idempotency.spring.web;

import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.lang.reflect.Method;
import java.util.Set;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.web.context.request.NativeWebRequest;
import org.springframework.web.context.request.async.DeferredResult;
import org.springframework.web.method.HandlerMethod;
import org.springframework.web.util.WebUtils;

/**
 * What a container async timeout of a claimed {@link IdempotentEndpoint} request means for its
 * call, decided once ({@link #decide}), at the timeout's first sign ({@link AsyncTimeouts}' own
 * timeout handler, or its turn in the chain of processing interceptors), or sooner, when the work's
 * executor refused its task ({@link #workRejected}): work still queued is taken over by the
 * starter, a stream is cut short or awaited, or the call is detached, its key kept claimed and its
 * work's result stored when it comes (SPEC 13). It notes the async round the request is in ({@link
 * #callableRound}, {@link #deferredRound}), on which the decision depends. Split out of {@link
 * AsyncTimeouts}, the interceptor that asks it, and logged under its logger. Thread-safe: the
 * decision is guarded by this.
 */
final class TimeoutDecision {

  /** Under AsyncTimeouts' logger, as before this class was split out of it. */
  private static final Logger log = LoggerFactory.getLogger(AsyncTimeouts.class);

  /** What the starter made of the request's timeout, decided once ({@link #decide}). */
  enum Timeout {
    /** A stream was cut short: Spring's timeout handling ends it ({@link #cutAStream}). */
    STREAM_CUT,
    /**
     * A stream that wrote nothing was cut short, its outcome decided at its end ({@link
     * StreamEnd#awaitStreamEnd}): Spring's timeout handling ends the request, never stored.
     */
    STREAM_AWAITED,
    /** The call was detached: the key stays claimed, the work's result is stored. */
    DETACHED,
    /** A {@code Callable}'s result came just before: stored now, whatever answers the timeout. */
    RESULT_STORED,
    /** Not detached (reported, not started, its result came, or its task never ran). */
    NOT_DETACHED
  }

  private final EndpointCall call;
  private final AsyncWork work;
  private final HandlerMethod handler;
  private final Set<Method> warnedUnfollowed;
  private final Consumer<Runnable> graceRunsOut;
  private @Nullable Timeout timeout; // guarded by this: decided at the first sign of the timeout
  private volatile @Nullable DeferredResult<?> deferredResult;
  // the DeferredResult of the handler's own result (not of an emitter or a later stage's)
  private volatile @Nullable DeferredResult<?> handlersDeferred;
  private volatile boolean callableWork;
  private volatile boolean rejectedWorkTaken; // taken over when its executor refused its task

  /**
   * @param warnedUnfollowed the handlers already named in a WARN for a result not followed (shared
   *     by the application's requests, so that each is named once)
   * @param graceRunsOut runs its task shortly before the guard's close grace, counted from now,
   *     runs out: the bound of the wait for a cut-short emitter's end
   */
  TimeoutDecision(
      EndpointCall call,
      HandlerMethod handler,
      Set<Method> warnedUnfollowed,
      Consumer<Runnable> graceRunsOut) {
    this.call = call;
    this.work = call.asyncWork();
    this.handler = handler;
    this.warnedUnfollowed = warnedUnfollowed;
    this.graceRunsOut = graceRunsOut;
  }

  /** The work is a {@code Callable}'s, whose result reaches {@link AsyncTimeouts#postProcess}. */
  void callableRound() {
    callableWork = true;
  }

  /** Spring MVC drives {@code deferredResult}, for a result that races a timeout. */
  void deferredRound(DeferredResult<?> deferredResult) {
    this.deferredResult = deferredResult;
    if (handlersDeferred == null && !callableWork) {
      handlersDeferred = deferredResult; // the first async round's: the handler's own result
    }
  }

  /** The {@code DeferredResult} Spring MVC drives now, or null (none yet). */
  @Nullable DeferredResult<?> deferredResult() {
    return deferredResult;
  }

  /**
   * The {@code DeferredResult} of the handler's own result (not of an emitter or a later stage's),
   * or null.
   */
  @Nullable DeferredResult<?> handlersDeferred() {
    return handlersDeferred;
  }

  /** Whether the work was taken over when its executor refused its task ({@link #workRejected}). */
  boolean rejectedWorkTaken() {
    return rejectedWorkTaken;
  }

  /** Whether the call was detached ({@link Timeout#DETACHED}). */
  synchronized boolean detached() {
    return timeout == Timeout.DETACHED;
  }

  /**
   * What the timeout means for the call, decided at its first sign (the starter's timeout handler,
   * or, if it was not added, this interceptor's turn in the chain): a stream is cut short, or the
   * call is detached (its response no longer held back, so that whatever answers the timeout goes
   * to the client, and never stored); work still queued in the async executor, a stream's too, is
   * taken over by the starter ({@link #takeOver}).
   */
  synchronized Timeout decide(NativeWebRequest request) {
    if (timeout == null) {
      CapturingResponse capture = captureOf(request);
      LateResponse late = lateResponseOf(request, capture);
      Timeout taken = late == null || capture == null ? null : takeOver(late, capture);
      if (taken != null) {
        timeout = taken;
      } else if (work.abandonQueuedWork()) {
        timeout = Timeout.NOT_DETACHED; // the request's end releases the key
      } else {
        Timeout cut = cutAStream(request);
        if (cut == null && cutALaterStage(request)) {
          cut = Timeout.STREAM_CUT;
        }
        timeout = cut != null ? cut : detach(request);
      }
    }
    return timeout;
  }

  /**
   * Work still queued in Spring MVC's async executor, which cancels its task at the timeout, is
   * taken over: the starter runs it, detached from the request, the key claimed until it ends
   * ({@link AsyncWork#takeOverQueuedWork}). A {@code Callable}'s request is then answered as a
   * detached one ({@code 409}, or a {@code WebAsyncTask}'s own timeout answer), a stream's as a
   * stream whose end decides ({@link Timeout#STREAM_AWAITED}: Spring's timeout answer).
   *
   * @param late the call's request and response as the handler left them ({@link #lateResponseOf})
   * @param capture the starter's capture of the call's response
   * @return what became of the request, or null if there was no queued work to take over
   */
  private @Nullable Timeout takeOver(LateResponse late, CapturingResponse capture) {
    if (!work.takeOverQueuedWork(late)) {
      return null;
    }
    if (work.streamEnd().tookOverAStream()) {
      log.debug("An idempotent endpoint's queued stream timed out; the starter runs it");
      return Timeout.STREAM_AWAITED;
    }
    capture.discard(); // the timeout's answer goes to the client as it is, never stored
    log.debug(
        "An idempotent endpoint's queued work timed out; the starter runs it, the key claimed");
    return Timeout.DETACHED;
  }

  /**
   * The executor that was to run the work (Spring MVC's, or a {@code WebAsyncTask}'s own) refused
   * its task (every thread busy, its queue full): the case of work still queued at a timeout,
   * reached sooner, since it never began and never will. The handler method ran, and may have sent
   * before it returned the work, while the work may be the send: so it is taken over as at a
   * timeout ({@link #takeOver}), the key claimed until it ends, and the request's async dispatch,
   * whose result is the refusal, is answered {@code 409} ({@link
   * AsyncDispatches#answerRejectedWork}) instead of Spring MVC's answer to it (a 5xx, which would
   * release the key).
   *
   * <p>Why here: Spring MVC calls no processing interceptor for a refused task ({@code
   * CallableInterceptorChain.applyPostProcess} calls only those whose {@code preProcess} ran, and
   * none did), and hands the refusal on as the async result, dispatched once the request's own
   * thread returns to the container (a Servlet container delays a dispatch until then). So the
   * first place the starter sees it is {@code afterConcurrentHandlingStarted}, on the request's own
   * thread, before that dispatch: the work is taken over there, not run on that thread, since its
   * result could no longer be the request's answer (Spring MVC's async result is set already).
   *
   * <p>A later stage's {@code Callable} refused so (more async work that a stage which ran
   * returned) never began either: it is taken over the same way ({@link
   * AsyncWork#takeOverRefusedLaterStage}), its failure recorded as answered without its body since
   * a stage that ran may have sent. A later stream refused so is not taken over: it is recorded as
   * answered without its body ({@link AsyncWork#laterStageRejected}), and its client gets Spring
   * MVC's answer to the refusal.
   *
   * @return true if the work (a first stage's, or a later stage's {@code Callable}) was queued, not
   *     yet begun, and is now taken over
   */
  synchronized boolean workRejected(NativeWebRequest request) {
    if (timeout != null) {
      return false;
    }
    CapturingResponse capture = captureOf(request);
    LateResponse late = lateResponseOf(request, capture);
    if (late == null || capture == null) {
      return false;
    }
    Timeout taken = takeOver(late, capture);
    if (taken == null) {
      // a later stage's work, refused: a Callable's taken over too, a stream's recorded
      if (work.takeOverRefusedLaterStage(late)) {
        capture.discard(); // the client gets 409, never stored
        timeout = Timeout.DETACHED;
        rejectedWorkTaken = true;
        log.debug("An idempotent endpoint's later async stage was refused; the starter runs it");
        return true;
      }
      if (work.laterStageRejected(late)) {
        log.debug("An idempotent endpoint's later async stage was refused by its executor");
      }
      return false;
    }
    timeout = taken;
    rejectedWorkTaken = true;
    log.debug("An idempotent endpoint's async executor refused its work; the starter runs it");
    return true;
  }

  private Timeout detach(NativeWebRequest request) {
    CapturingResponse capture = captureOf(request);
    LateResponse late = lateResponseOf(request, capture);
    if (late == null || capture == null) {
      return Timeout.NOT_DETACHED;
    }
    if (!work.detach(late)) {
      if (callableWork && work.detachWithEarlyResult(late)) {
        // the result is the answer, unless an application's timeout fallback wins the request
        // first: either goes to the client as it is
        capture.discard();
        return Timeout.RESULT_STORED;
      }
      return Timeout.NOT_DETACHED;
    }
    capture.discard(); // the timeout's answer goes to the client as it is, never stored
    if (deferredResult != null && !work.lateResultObserved()) {
      warnUnfollowed();
    }
    log.debug(
        "An idempotent endpoint's async request timed out; its work goes on, the key claimed");
    return Timeout.DETACHED;
  }

  /**
   * A timeout of an async result the advisor does not follow (a shape it does not know): its work
   * may still send, and nothing will report its end, so it fails closed. The call is detached and
   * the client answered as at any timeout; the key stays claimed, as for a send that never reports
   * (renewed up to the guard's renewal limit, then until its lease lapses), so that a retry
   * meanwhile gets 409, never a second send; its result is not stored. One WARN per handler names
   * it and the class it returned.
   */
  private void warnUnfollowed() {
    if (warnedUnfollowed.add(handler.getMethod())) {
      Class<?> returned = work.returnedClass();
      log.warn(
          "@IdempotentEndpoint {} returned a {}, an async result the guard does not follow: at a"
              + " container async timeout its key stays claimed, since its work may still send"
              + " (renewed up to the guard's lease renewal limit, then held until its lease runs"
              + " out), and its result is not stored; declare a CompletableFuture, a"
              + " DeferredResult or a Callable (logged once per handler)",
          IdempotentEndpoints.describe(handler.getMethod()),
          returned == null ? "result" : returned.getName());
    }
  }

  /**
   * A timeout of a response that went out in part (a stream, or a body past the bound), or of a
   * handler that returned a stream (an emitter, a {@code StreamingResponseBody}) before it wrote:
   * there is no answer left to give the client, nor one to store, and its work may still send. A
   * {@code StreamingResponseBody} that wrote nothing yet, whose end this call hears of, is decided
   * at that end ({@link StreamEnd#awaitStreamEnd}: its own failure releases the key, any other end
   * records it as answered without its body); so is the handler's own emitter that sent nothing yet
   * ({@link StreamEnd#awaitEmitterEnd}), observed from now on, since Spring's timeout handling next
   * marks it complete: if it has not ended shortly before the guard's close grace has passed since
   * the timeout, it is recorded then. Any other stream is cut short, recorded as answered without
   * its body when the request ends ({@link EndpointCall#streamTimedOut}). Either way Spring's own
   * timeout handling ends the request.
   *
   * @return what became of the stream, or null if the response is not one
   */
  private @Nullable Timeout cutAStream(NativeWebRequest request) {
    CapturingResponse capture = captureOf(request);
    if (capture == null || !(capture.passedOn() || capture.returnsAStream())) {
      return null;
    }
    LateResponse late =
        capture.returnsAStream() && !capture.wroteBody() ? lateResponseOf(request, capture) : null;
    if (late != null) {
      if (work.streamEnd().awaitStreamEnd(late, capture::wroteBody)) {
        log.debug("An idempotent endpoint's stream timed out before it wrote; its end decides");
        return Timeout.STREAM_AWAITED;
      }
      if (work.streamEnd().awaitEmitterEnd(late, capture::wroteBody)) {
        // the application may never end it: bounded as at a shutdown
        graceRunsOut.accept(work.streamEnd()::streamOutlivesTheGrace);
        log.debug("An idempotent endpoint's emitter timed out before it sent; its end decides");
        return Timeout.STREAM_AWAITED;
      }
    }
    call.streamTimedOut(capture.getStatus());
    capture.cutShort();
    return Timeout.STREAM_CUT;
  }

  /**
   * A timeout that loses the result of a later stage of the work (more async work that a stage
   * which ran returned: {@link AsyncWork#laterStageLost}), while a stage that ran may have sent. As
   * a stream cut short, the call is recorded as answered without its body when the request ends
   * ({@link EndpointCall#streamTimedOut}): a retry gets {@code 422 response-not-stored}, never a
   * second send.
   */
  private boolean cutALaterStage(NativeWebRequest request) {
    HttpServletResponse servletResponse = request.getNativeResponse(HttpServletResponse.class);
    if (servletResponse == null || !work.laterStageLost()) {
      return false;
    }
    call.streamTimedOut(servletResponse.getStatus());
    return true;
  }

  /** The starter's capture of the call's response, or null where the response is not its own. */
  static @Nullable CapturingResponse captureOf(NativeWebRequest request) {
    HttpServletResponse servletResponse = request.getNativeResponse(HttpServletResponse.class);
    return servletResponse == null
        ? null
        : WebUtils.getNativeResponse(servletResponse, CapturingResponse.class);
  }

  /**
   * What the call's work is rendered into once it outlives its request ({@link LateResponse}: a
   * copy of the request, and of the response as the handler left it), taken now, while both are
   * valid; null where either is not there.
   */
  @Nullable LateResponse lateResponseOf(
      NativeWebRequest request, @Nullable CapturingResponse capture) {
    HttpServletRequest servletRequest = request.getNativeRequest(HttpServletRequest.class);
    return servletRequest == null || capture == null
        ? null
        : LateResponse.of(servletRequest, capture, handler, capture.limit());
  }
}
