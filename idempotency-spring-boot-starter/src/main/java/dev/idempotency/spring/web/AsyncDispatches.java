package dev.idempotency.spring.web;

import jakarta.servlet.AsyncContext;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.http.HttpStatus;
import org.springframework.web.context.request.NativeWebRequest;
import org.springframework.web.context.request.async.DeferredResult;
import org.springframework.web.context.request.async.WebAsyncManager;

/**
 * The async dispatch of a claimed {@link IdempotentEndpoint} request whose work outlives it, before
 * Spring MVC handles the result that dispatch carries ({@link IdempotentEndpointInterceptor} asks,
 * through {@link AsyncTimeouts}): a request whose work the starter took over or follows is answered
 * {@code 409 request-in-progress} in place of that result, the key claimed until the work ends
 * ({@link #answerRejectedWork}, {@link #answerTakenOverTask}, {@link #answerDetachedOutcome}); and
 * the work's own outcome is recorded when something replaced it after the work ended ({@link
 * #outcomeReplaced}). The same {@code 409} answers a detached call's timeout ({@link
 * #answer409(NativeWebRequest)}). It keeps what the {@code Callable} work's task ended with, as
 * {@link AsyncTimeouts#postProcess} saw it. Split out of {@link AsyncTimeouts}, and logged under
 * its logger.
 */
final class AsyncDispatches {

  /** Under AsyncTimeouts' logger, as before this class was split out of it. */
  private static final Logger log = LoggerFactory.getLogger(AsyncTimeouts.class);

  private final AsyncWork work;
  private final TimeoutDecision decision;
  private final String headerName;
  private final AtomicBoolean answered = new AtomicBoolean();
  // the Callable work's own outcome as postProcess saw it, until the async dispatch of the result
  private final AtomicReference<@Nullable Object> callableOutcome =
      new AtomicReference<>(AsyncWork.NO_RESULT);
  // what Spring MVC's task of work the starter took over ended with (it did not run the work)
  private volatile @Nullable Object takenOverTaskResult = AsyncWork.NO_RESULT;

  /**
   * @param decision what the request's timeout was decided to mean
   * @param headerName the name of the idempotency key's header, for the {@code 409}'s detail
   */
  AsyncDispatches(AsyncWork work, TimeoutDecision decision, String headerName) {
    this.work = work;
    this.decision = decision;
    this.headerName = headerName;
  }

  /**
   * Spring MVC's task of work the starter took over ended with {@code result}, without running the
   * work ({@link #answerTakenOverTask}).
   */
  void takenOverTaskEnded(@Nullable Object result) {
    takenOverTaskResult = result;
  }

  /** The {@code Callable} work's own outcome: what its async dispatch must carry. */
  void callableOutcome(@Nullable Object outcome) {
    callableOutcome.set(outcome);
  }

  /**
   * The async dispatch of a request whose work was taken over when its executor refused it ({@link
   * TimeoutDecision#workRejected}): its result is that refusal, so the client is answered {@code
   * 409} {@code request-in-progress} instead, the key claimed, and a retry gets the work's answer
   * replayed once it ended.
   *
   * @return whether it answered (the request's work was taken over so)
   */
  boolean answerRejectedWork(NativeWebRequest request) throws IOException {
    if (!decision.rejectedWorkTaken()) {
      return false;
    }
    answer409(request);
    return true;
  }

  /**
   * The async dispatch of a request whose work was taken over at its timeout ({@link
   * TimeoutDecision#takeOver}) while Spring MVC's task of that work still began before Spring MVC's
   * own timeout handling cancelled it: the task, refused ({@link AsyncWork#workStarts}: a {@code
   * CancellationException}, the work never began there), set its end as the request's async result,
   * dispatched once the container's timeout handling returned. That happens when the work taken
   * over runs on the thread handling the timeout (the starter's pool full: {@link
   * UninterruptedWork}), which holds the timeout's handling, the starter's handler running first,
   * until the work ends. The client is answered {@code 409} {@code request-in-progress} as at any
   * timeout of a detached call, instead of Spring MVC's answer to that end (a 500, logged at ERROR
   * by the container); the key stays claimed until the work ends, and a retry gets its answer
   * replayed.
   *
   * <p>Only for a detached call ({@link TimeoutDecision.Timeout#DETACHED}: a stream taken over gets
   * Spring's timeout answer) whose dispatched result is what Spring MVC's task of the taken-over
   * work ended with ({@link AsyncTimeouts#postProcess}), not a timeout answer an interceptor gave.
   * The timeout's own {@code 409}, written already, could not end the request (a dispatch was
   * pending): it is written again unless the response went out.
   *
   * @param manager the request's async manager, which holds the dispatched result
   * @return whether it answered
   */
  boolean answerTakenOverTask(NativeWebRequest request, WebAsyncManager manager)
      throws IOException {
    Object taskResult = takenOverTaskResult;
    if (!decision.detached() || taskResult == AsyncWork.NO_RESULT) {
      return false;
    }
    if (!manager.hasConcurrentResult() || manager.getConcurrentResult() != taskResult) {
      return false;
    }
    answer409(request, false); // the timeout's answer did not end the request: this dispatch does
    log.debug(
        "An idempotent endpoint's work taken over at its timeout still had Spring MVC's task"
            + " dispatched; answered 409");
    return true;
  }

  /**
   * The async dispatch of a detached call ({@link TimeoutDecision.Timeout#DETACHED}) whose result
   * is the {@code Callable} work's own outcome, as {@link AsyncTimeouts#postProcess} saw it: the
   * outcome came while the container's timeout handling was under way, after the timeout's 409 went
   * out and before the starter's answer reached Spring MVC ({@link AsyncTimeouts#handleTimeout} had
   * not returned), so Spring MVC took it as the request's async result and dispatched it (a
   * container allows a dispatch while it times a request out). Tomcat 11 sends a response as soon
   * as its content length is written, so a client that got the 409 may have set the work going on
   * (a retry, another request) before then. The starter took that outcome already as the detached
   * call's late result ({@link AsyncWork#lateResult}: rendered and stored, or, if it is more async
   * work, run or awaited to its end), so Spring MVC must not handle it too: it would run that work
   * a second time, or take a later {@code DeferredResult} from the starter (its result handler in
   * place of the starter's, so that the starter never hears its answer and records the call as
   * answered without its body). The dispatch ends here, with the timeout's 409, written again
   * unless the response went out; the key stays claimed until the starter recorded the work's end.
   *
   * <p>The same for more async work (a {@code Callable}, a {@code WebAsyncTask}, a lazy {@code
   * Mono}) that an application's own {@code DeferredResult} was set to in that window, or while an
   * application's timeout interceptor took its time after the call was detached ({@link
   * #handlersOwnWork}): the advisor sets Spring MVC's copy, not yet expired, which dispatches it,
   * and reports it to the detached call, which runs it itself ({@link AsyncWork#followsDetached}).
   * Was a second send (probeV, {@code MvcDetachedStageDispatchRaceProbeTest}). Work that reached
   * the call before it was detached is Spring MVC's to run, the starter never follows it.
   *
   * @param manager the request's async manager, which holds the dispatched result
   * @return whether it answered
   */
  boolean answerDetachedOutcome(NativeWebRequest request, WebAsyncManager manager)
      throws IOException {
    if (!decision.detached() || !manager.hasConcurrentResult()) {
      return false;
    }
    Object outcome = callableOutcome.get();
    Object dispatched = manager.getConcurrentResult();
    if (outcome != AsyncWork.NO_RESULT && dispatched == outcome) {
      callableOutcome.compareAndSet(outcome, AsyncWork.NO_RESULT);
    } else if (!handlersOwnWork(dispatched)) {
      return false;
    }
    answer409(request, false);
    log.debug(
        "An idempotent endpoint's detached work ended while its timeout was handled and Spring MVC"
            + " dispatched its result; the starter follows it, answered 409");
    return true;
  }

  /**
   * Whether {@code dispatched} is more async work that the handler's own {@code DeferredResult}
   * (the copy Spring MVC drives of an application's own: {@link IdempotentEndpointAdvisor}) was set
   * to, and the starter runs it itself, the call detached ({@link AsyncWork#followsDetached}): set
   * while the container's timeout handling was under way, Spring MVC's copy, not yet expired, took
   * it and dispatched it, while the advisor reported it to the detached call, which continues it.
   * Only for a handler that returned a {@code DeferredResult}: extended to Spring MVC's adapter of
   * a handler's {@code CompletableFuture}, the race of {@code MvcDetachedStageManyProbeTest} left a
   * first request unanswered (60 s) on Boot 4.0, twice (fixown; not explained). A handler's stage
   * does not need it: the advisor never hands Spring MVC a value the starter runs itself ({@code
   * IdempotentEndpointAdvisor.handOn}).
   */
  private boolean handlersOwnWork(@Nullable Object dispatched) {
    DeferredResult<?> deferred = decision.handlersDeferred();
    Class<?> returned = work.returnedClass();
    return deferred != null
        && returned != null
        && DeferredResult.class.isAssignableFrom(returned) // not Spring MVC's adapter of a stage
        && deferred == decision.deferredResult()
        && work.lateResultObserved()
        && deferred.hasResult()
        && deferred.getResult() == dispatched
        && work.followsDetached(dispatched);
  }

  /**
   * The async dispatch of a claimed request, before Spring MVC handles the result it carries: if
   * that is not the work's own outcome, something replaced it after the work ended. Spring MVC's
   * {@code CallableInterceptorChain} and {@code DeferredResultInterceptorChain} make the first
   * failure of an interceptor's {@code postProcess} the request's result, in place of the work's:
   * an application's interceptor that fails after the work sent would have its failure rendered (a
   * 500, which releases the key) and the retry would send again (SPEC 1). So the work's own outcome
   * is recorded instead, as a late result rendered as Spring MVC would have rendered it ({@link
   * AsyncWork#detachWithEarlyResult}, as for a result that came just before a timeout): a value is
   * stored, a failure goes through the application's exception resolvers (one nothing maps releases
   * the key). The client gets Spring MVC's answer to what was dispatched, as it is, never stored;
   * one WARN names the class of what replaced the outcome.
   *
   * <p>The work's own outcome: a {@code Callable}'s as {@link AsyncTimeouts#postProcess} saw it
   * (asked once per outcome); the handler's own {@code DeferredResult}'s (not an emitter's, nor a
   * later stage's) (Spring MVC's adapter of a {@code CompletionStage}, or the copy of an
   * application's own: {@link IdempotentEndpointAdvisor}) as it was set on Spring MVC's {@code
   * DeferredResult}, which keeps it whatever the chain dispatched, so neither this interceptor's
   * own {@code postProcess} (which the chain skips once one failed) nor the identity of a failure
   * (Spring MVC unwraps a {@code CompletionException}) matters. The value recorded is the one the
   * advisor observed from the handler's own result; if that has not reached the call yet (it races
   * with the dispatch) and is a final one (no more async work, no stream), the call is detached and
   * records it when it comes. An outcome that is more async work (a later stage, completed or under
   * way), which Spring MVC will not follow once it dispatched the replacement, is followed to its
   * end by the starter, detached, as work it took over is ({@link
   * AsyncWork#followReplacedOutcome}), and that end recorded. Does nothing if the dispatched result
   * is the work's own, if no outcome came (a timeout first), for a result the advisor does not
   * follow, or if the call was reported or detached already.
   *
   * @param request the request of the async dispatch
   * @param manager its async manager, which holds the dispatched result
   * @return whether the work's outcome was recorded in place of the dispatched result
   */
  boolean outcomeReplaced(NativeWebRequest request, WebAsyncManager manager) {
    Object seen = callableOutcome.getAndSet(AsyncWork.NO_RESULT);
    if (!manager.hasConcurrentResult()) {
      return false;
    }
    Object dispatched = manager.getConcurrentResult();
    boolean replaced;
    Object own;
    if (seen != AsyncWork.NO_RESULT) {
      own = seen;
      // a final outcome reached the call; more async work never does (lateResult)
      replaced = dispatched != seen && (work.earlyResult() == seen || !isFinal(seen));
    } else {
      DeferredResult<?> deferred = decision.handlersDeferred();
      own = deferred == null ? null : deferred.getResult();
      replaced =
          deferred != null
              && deferred == decision.deferredResult()
              && work.lateResultObserved()
              && deferred.hasResult()
              && dispatched != own;
    }
    if (!replaced) {
      return false;
    }
    CapturingResponse capture = TimeoutDecision.captureOf(request);
    LateResponse late = decision.lateResponseOf(request, capture);
    if (late == null || capture == null) {
      return false;
    }
    // more async work, which Spring MVC will not follow now, is followed by the starter
    boolean recorded =
        isFinal(own)
            ? recordOwnOutcome(late, seen == AsyncWork.NO_RESULT)
            : work.followReplacedOutcome(late, own);
    if (!recorded) {
      return false;
    }
    capture.discard(); // Spring MVC's answer to the dispatched result goes to the client as it is
    log.warn(
        "An idempotent endpoint's async result was replaced after its work ended ({}, as when an"
            + " async interceptor's postProcess fails): the work's own outcome is recorded, and"
            + " the client gets Spring MVC's answer to the replacement",
        dispatched == null ? "null" : dispatched.getClass().getName());
    return true;
  }

  /**
   * Records the work's own outcome with {@code late}: the one that came ({@link
   * AsyncWork#detachWithEarlyResult}), or, for an observed result whose outcome has not reached the
   * call yet, the one it reports when it does ({@link AsyncWork#detach}; retried once should it
   * come between the two).
   */
  private boolean recordOwnOutcome(LateResponse late, boolean mayAwait) {
    if (work.detachWithEarlyResult(late)) {
      return true;
    }
    return mayAwait && (work.detach(late) || work.detachWithEarlyResult(late));
  }

  /**
   * Whether a handler's result completed with a final outcome, one the advisor reports to the call
   * as it is ({@link AsyncWork#lateResult}), not more async work or a stream, which it does not.
   */
  private static boolean isFinal(@Nullable Object outcome) {
    return !AsyncResultShapes.moreAsyncWork(outcome);
  }

  /**
   * Answers the timed-out client of a detached call with a 409 and ends its request, the key still
   * claimed; once.
   */
  void answer409(NativeWebRequest request) throws IOException {
    answer409(request, true);
  }

  /**
   * @param once whether only if the client was not answered yet; else written again, unless the
   *     response went out ({@link #answerTakenOverTask}: the timeout's answer did not end the
   *     request)
   */
  private void answer409(NativeWebRequest request, boolean once) throws IOException {
    HttpServletRequest servletRequest = request.getNativeRequest(HttpServletRequest.class);
    CapturingResponse capture = TimeoutDecision.captureOf(request);
    if (servletRequest == null
        || capture == null
        || (!answered.compareAndSet(false, true) && once)) {
      return;
    }
    HttpServletResponse client = (HttpServletResponse) capture.getResponse();
    try {
      if (!client.isCommitted()) {
        client.resetBuffer();
        client.setHeader("Retry-After", "1");
        Problems.write(
            client,
            HttpStatus.CONFLICT,
            "request-in-progress",
            "the request with this "
                + headerName
                + (decision.rejectedWorkTaken()
                    ? " is still being processed (its async executor was full); a retry gets its"
                        + " response once it is done"
                    : " timed out while it is still being processed; it goes on, and a retry gets"
                        + " its response once it is done"));
      }
    } finally {
      AsyncContext async =
          servletRequest.isAsyncStarted() ? servletRequest.getAsyncContext() : null;
      if (async != null) {
        async.complete();
      }
    }
  }
}
