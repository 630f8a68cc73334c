package dev.idempotency.spring.web;

import jakarta.servlet.AsyncContext;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.lang.reflect.Method;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.http.HttpStatus;
import org.springframework.http.ResponseEntity;
import org.springframework.web.context.request.NativeWebRequest;
import org.springframework.web.context.request.ServletWebRequest;
import org.springframework.web.context.request.async.AsyncWebRequest;
import org.springframework.web.context.request.async.CallableProcessingInterceptor;
import org.springframework.web.context.request.async.DeferredResult;
import org.springframework.web.context.request.async.DeferredResultProcessingInterceptor;
import org.springframework.web.context.request.async.WebAsyncManager;
import org.springframework.web.method.HandlerMethod;
import org.springframework.web.servlet.mvc.method.annotation.ResponseBodyEmitter;
import org.springframework.web.util.WebUtils;

/**
 * A container async timeout of a claimed {@link IdempotentEndpoint} request ends the request, not
 * the send (SPEC 13): registered on the request's {@code WebAsyncManager}, ahead of Spring's own
 * timeout handling, it answers the client at once with a 409 {@code request-in-progress} (with
 * {@code Retry-After}), leaves the key claimed and the async result unset, and, when the handler's
 * work ends, has its result rendered and stored ({@link LateResponse}), so that the client's retry
 * gets it replayed. A failed result releases the key, as it would have without the timeout. This
 * holds for {@code Callable}, {@code WebAsyncTask} and {@code CompletionStage} results (a {@code
 * Callable}'s work runs shielded from Spring MVC's interrupt at the timeout: {@link
 * UninterruptedWork}; a {@code WebAsyncTask}'s own {@code onTimeout} answer goes to the client, the
 * key kept claimed all the same: {@link #ownTimeout}) and for an application's own {@code
 * DeferredResult} (seen through a copy, whose timeout the guard answers; its own timeout callback
 * and timeout result are not used). Any other async result, one the advisor does not follow, fails
 * closed: the client gets the same 409, and the key stays claimed since its work may still send,
 * with one WARN per handler ({@link #warnUnfollowed}).
 *
 * <p>The starter learns of the timeout first, whatever the application's own async interceptors do:
 * {@link #heedTimeoutOf} adds a timeout handler to the request's {@code AsyncWebRequest} before
 * Spring MVC starts the async processing and adds its own, and the {@code AsyncWebRequest} runs all
 * of its timeout handlers in order, while the chain of processing interceptors stops at the first
 * that answers. So an application's timeout fallback registered ahead of this interceptor (a {@code
 * CallableProcessingInterceptor} registered per request in a {@code HandlerInterceptor}) is
 * answered to the client, but never stored, and the key stays claimed until the work ends, as at
 * any timeout. A {@code Callable}'s result that came just before the timeout, not yet dispatched,
 * is stored at once: the fallback may win the request's answer, and the send happened.
 */
final class AsyncTimeouts
    implements CallableProcessingInterceptor, DeferredResultProcessingInterceptor {

  /** The key under which it is registered on the request's async manager. */
  static final String KEY = AsyncTimeouts.class.getName();

  private static final Logger log = LoggerFactory.getLogger(AsyncTimeouts.class);

  private final EndpointCall call;
  private final AsyncWork work;
  private final HandlerMethod handler;
  private final String headerName;
  private final Set<Method> warnedUnfollowed;
  private final Consumer<Runnable> graceRunsOut;
  private @Nullable Timeout timeout; // guarded by this: decided at the first sign of the timeout
  private volatile @Nullable DeferredResult<?> deferredResult;
  // the DeferredResult of the handler's own result (not of an emitter or a later stage's)
  private volatile @Nullable DeferredResult<?> handlersDeferred;
  private volatile boolean callableWork;
  private volatile boolean rejectedWorkTaken; // taken over when its executor refused its task
  private final AtomicBoolean answered = new AtomicBoolean();
  // the Callable work's own outcome as postProcess saw it, until the async dispatch of the result
  private final AtomicReference<@Nullable Object> callableOutcome =
      new AtomicReference<>(AsyncWork.NO_RESULT);
  // what Spring MVC's task of work the starter took over ended with (it did not run the work)
  private volatile @Nullable Object takenOverTaskResult = AsyncWork.NO_RESULT;

  /** What the starter made of the request's timeout, decided once ({@link #decide}). */
  private enum Timeout {
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

  /**
   * @param warnedUnfollowed the handlers already named in a WARN for a result not followed (shared
   *     by the application's requests, so that each is named once)
   * @param graceRunsOut runs its task shortly before the guard's close grace, counted from now,
   *     runs out: the bound of the wait for a cut-short emitter's end
   */
  AsyncTimeouts(
      EndpointCall call,
      HandlerMethod handler,
      String headerName,
      Set<Method> warnedUnfollowed,
      Consumer<Runnable> graceRunsOut) {
    this.call = call;
    this.work = call.asyncWork();
    this.handler = handler;
    this.headerName = headerName;
    this.warnedUnfollowed = warnedUnfollowed;
    this.graceRunsOut = graceRunsOut;
  }

  /**
   * Adds the starter's own handler of a container async timeout to the request's {@code
   * AsyncWebRequest}, ahead of the one Spring MVC adds when it starts the async processing (which
   * runs the processing interceptors, the application's among them): so the call is detached (or a
   * stream cut short) before any interceptor may answer the timeout. Called while the handler
   * method returns, once Spring MVC has set the {@code AsyncWebRequest}; does nothing if the
   * request has none or is not a claimed one.
   *
   * @param manager the request's async manager
   */
  static void heedTimeoutOf(WebAsyncManager manager) {
    AsyncWebRequest asyncRequest = manager.getAsyncWebRequest();
    if (asyncRequest != null
        && !manager.isConcurrentHandlingStarted()
        && manager.getCallableInterceptor(KEY) instanceof AsyncTimeouts timeouts) {
      asyncRequest.addTimeoutHandler(() -> timeouts.timeoutCame(asyncRequest));
    }
  }

  /** The first of the request's timeout handlers: decides, before any interceptor answers. */
  private void timeoutCame(NativeWebRequest request) {
    Timeout decided;
    try {
      decided = decide(request);
    } catch (RuntimeException e) {
      // Spring's own timeout handling, next, must still run; a result not stored is logged
      log.debug("The starter's timeout handling of an idempotent endpoint failed", e);
      return;
    }
    if (decided == Timeout.NOT_DETACHED) {
      DeferredResult<?> deferred = deferredResult;
      Object early = work.earlyResult();
      if (deferred != null && work.lateResultObserved() && early != AsyncWork.NO_RESULT) {
        // the result came just before the timeout, and Spring MVC's copy of it is not set yet: it
        // is the answer, ahead of any timeout answer (Spring's 503 would release a key whose send
        // happened)
        deferred.setErrorResult(early); // a value or a failure, as Spring's adapter sets it
      }
    }
  }

  /**
   * What the timeout means for the call, decided at its first sign (the starter's timeout handler,
   * or, if it was not added, this interceptor's turn in the chain): a stream is cut short, or the
   * call is detached (its response no longer held back, so that whatever answers the timeout goes
   * to the client, and never stored); work still queued in the async executor, a stream's too, is
   * taken over by the starter ({@link #takeOver}).
   */
  private synchronized Timeout decide(NativeWebRequest request) {
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
   * whose result is the refusal, is answered {@code 409} ({@link #answerRejectedWork}) instead of
   * Spring MVC's answer to it (a 5xx, which would release the key).
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

  /**
   * The async dispatch of a request whose work was taken over when its executor refused it ({@link
   * #workRejected}): its result is that refusal, so the client is answered {@code 409} {@code
   * request-in-progress} instead, the key claimed, and a retry gets the work's answer replayed once
   * it ended.
   *
   * @return whether it answered (the request's work was taken over so)
   */
  boolean answerRejectedWork(NativeWebRequest request) throws IOException {
    if (!rejectedWorkTaken) {
      return false;
    }
    answer409(request);
    return true;
  }

  /**
   * The async dispatch of a request whose work was taken over at its timeout ({@link #takeOver})
   * while Spring MVC's task of that work still began before Spring MVC's own timeout handling
   * cancelled it: the task, refused ({@link AsyncWork#workStarts}: a {@code CancellationException},
   * the work never began there), set its end as the request's async result, dispatched once the
   * container's timeout handling returned. That happens when the work taken over runs on the thread
   * handling the timeout (the starter's pool full: {@link UninterruptedWork}), which holds the
   * timeout's handling, the starter's handler running first, until the work ends. The client is
   * answered {@code 409} {@code request-in-progress} as at any timeout of a detached call, instead
   * of Spring MVC's answer to that end (a 500, logged at ERROR by the container); the key stays
   * claimed until the work ends, and a retry gets its answer replayed.
   *
   * <p>Only for a detached call ({@link Timeout#DETACHED}: a stream taken over gets Spring's
   * timeout answer) whose dispatched result is what Spring MVC's task of the taken-over work ended
   * with ({@link #postProcess}), not a timeout answer an interceptor gave. The timeout's own {@code
   * 409}, written already, could not end the request (a dispatch was pending): it is written again
   * unless the response went out.
   *
   * @param manager the request's async manager, which holds the dispatched result
   * @return whether it answered
   */
  boolean answerTakenOverTask(NativeWebRequest request, WebAsyncManager manager)
      throws IOException {
    Object taskResult = takenOverTaskResult;
    synchronized (this) {
      if (timeout != Timeout.DETACHED || taskResult == AsyncWork.NO_RESULT) {
        return false;
      }
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
   * The async dispatch of a detached call ({@link Timeout#DETACHED}) whose result is the {@code
   * Callable} work's own outcome, as {@link #postProcess} saw it: the outcome came while the
   * container's timeout handling was under way, after the timeout's 409 went out and before the
   * starter's answer reached Spring MVC ({@link #handleTimeout} had not returned), so Spring MVC
   * took it as the request's async result and dispatched it (a container allows a dispatch while it
   * times a request out). Tomcat 11 sends a response as soon as its content length is written, so a
   * client that got the 409 may have set the work going on (a retry, another request) before then.
   * The starter took that outcome already as the detached call's late result ({@link
   * AsyncWork#lateResult}: rendered and stored, or, if it is more async work, run or awaited to its
   * end), so Spring MVC must not handle it too: it would run that work a second time, or take a
   * later {@code DeferredResult} from the starter (its result handler in place of the starter's, so
   * that the starter never hears its answer and records the call as answered without its body). The
   * dispatch ends here, with the timeout's 409, written again unless the response went out; the key
   * stays claimed until the starter recorded the work's end.
   *
   * @param manager the request's async manager, which holds the dispatched result
   * @return whether it answered
   */
  boolean answerDetachedOutcome(NativeWebRequest request, WebAsyncManager manager)
      throws IOException {
    Object outcome = callableOutcome.get();
    synchronized (this) {
      if (timeout != Timeout.DETACHED || outcome == AsyncWork.NO_RESULT) {
        return false;
      }
    }
    if (!manager.hasConcurrentResult() || manager.getConcurrentResult() != outcome) {
      return false;
    }
    callableOutcome.compareAndSet(outcome, AsyncWork.NO_RESULT);
    answer409(request, false);
    log.debug(
        "An idempotent endpoint's detached work ended while its timeout was handled and Spring MVC"
            + " dispatched its result; the starter follows it, answered 409");
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

  /** Notes that the work is a {@code Callable}'s, whose result reaches {@link #postProcess}. */
  @Override
  public <T> void beforeConcurrentHandling(NativeWebRequest request, Callable<T> task) {
    callableWork = true;
  }

  /** Notes the {@code DeferredResult} that Spring MVC drives, for a result that races a timeout. */
  @Override
  public <T> void beforeConcurrentHandling(
      NativeWebRequest request, DeferredResult<T> deferredResult) {
    this.deferredResult = deferredResult;
    if (handlersDeferred == null && !callableWork) {
      handlersDeferred = deferredResult; // the first async round's: the handler's own result
    }
  }

  @Override
  public <T> Object handleTimeout(NativeWebRequest request, Callable<T> task) throws Exception {
    Timeout decided = decide(request);
    if (decided == Timeout.STREAM_CUT || decided == Timeout.STREAM_AWAITED) {
      return RESULT_NONE; // Spring's timeout handling ends the request; the stream's call too
    }
    if (decided == Timeout.DETACHED) {
      answer409(request);
      return RESPONSE_HANDLED;
    }
    // the result came just before the timeout: it is the answer (a timeout would drop it)
    Object early = work.earlyResult();
    return early == AsyncWork.NO_RESULT ? RESULT_NONE : early;
  }

  /**
   * A {@code WebAsyncTask}'s own timeout callback is about to answer the client (it runs ahead of
   * this interceptor): the call is detached as at any timeout, the key stays claimed and the task's
   * late result is stored, while the client gets the application's timeout answer.
   *
   * @return the task's result if it came just before the timeout (the answer), else {@link
   *     #RESULT_NONE} (the application's callback answers)
   */
  Object ownTimeout(HttpServletRequest servletRequest, HttpServletResponse servletResponse) {
    Timeout decided = decide(new ServletWebRequest(servletRequest, servletResponse));
    if (decided == Timeout.DETACHED
        || decided == Timeout.STREAM_CUT
        || decided == Timeout.STREAM_AWAITED) {
      return RESULT_NONE; // the application's timeout answer goes to the client as it is
    }
    Object early = work.earlyResult();
    return early == AsyncWork.NO_RESULT ? RESULT_NONE : early;
  }

  @Override
  public <T> boolean handleTimeout(NativeWebRequest request, DeferredResult<T> deferredResult)
      throws Exception {
    Timeout decided = decide(request);
    if (decided == Timeout.STREAM_CUT || decided == Timeout.STREAM_AWAITED) {
      return true; // Spring's timeout handling ends the stream; the call is recorded
    }
    // a CompletionStage (adapted to a DeferredResult by Spring MVC) and an application's own
    // DeferredResult (seen through a copy: IdempotentEndpointAdvisor) report their late results
    // themselves; any other fails closed, detached all the same (warnUnfollowed)
    if (decided == Timeout.DETACHED) {
      answer409(request);
      return false;
    }
    if (!work.lateResultObserved()) {
      return true; // already reported: Spring may handle the timeout as usual
    }
    // the result came just before the timeout, and Spring MVC's copy of it is not set yet: it is
    // the answer (Spring's timeout would answer 503 and release a key whose send happened)
    Object early = work.earlyResult();
    if (early != AsyncWork.NO_RESULT) {
      deferredResult.setErrorResult(early); // a value or a failure, as Spring's adapter sets it
      return false;
    }
    return true;
  }

  @Override
  public <T> void postProcess(NativeWebRequest request, Callable<T> task, Object concurrentResult) {
    if (work.takenOver()) {
      // Spring MVC's task did not run the work: the starter runs it (answerTakenOverTask)
      takenOverTaskResult = concurrentResult;
      return;
    }
    if (concurrentResult instanceof Throwable failure) {
      call.asyncFailed(failure);
    }
    emitterResult(concurrentResult);
    work.lateResult(concurrentResult);
    callableOutcome.set(concurrentResult); // what the async dispatch must carry (outcomeReplaced)
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
   * <p>The work's own outcome: a {@code Callable}'s as {@link #postProcess} saw it (asked once per
   * outcome); the handler's own {@code DeferredResult}'s (not an emitter's, nor a later stage's)
   * (Spring MVC's adapter of a {@code CompletionStage}, or the copy of an application's own: {@link
   * IdempotentEndpointAdvisor}) as it was set on Spring MVC's {@code DeferredResult}, which keeps
   * it whatever the chain dispatched, so neither this interceptor's own {@code postProcess} (which
   * the chain skips once one failed) nor the identity of a failure (Spring MVC unwraps a {@code
   * CompletionException}) matters. The value recorded is the one the advisor observed from the
   * handler's own result; if that has not reached the call yet (it races with the dispatch) and is
   * a final one (no more async work, no stream), the call is detached and records it when it comes.
   * An outcome that is more async work (a later stage, completed or under way), which Spring MVC
   * will not follow once it dispatched the replacement, is followed to its end by the starter,
   * detached, as work it took over is ({@link AsyncWork#followReplacedOutcome}), and that end
   * recorded. Does nothing if the dispatched result is the work's own, if no outcome came (a
   * timeout first), for a result the advisor does not follow, or if the call was reported or
   * detached already.
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
      DeferredResult<?> deferred = handlersDeferred;
      own = deferred == null ? null : deferred.getResult();
      replaced =
          deferred != null
              && deferred == deferredResult
              && work.lateResultObserved()
              && deferred.hasResult()
              && dispatched != own;
    }
    if (!replaced) {
      return false;
    }
    CapturingResponse capture = captureOf(request);
    LateResponse late = lateResponseOf(request, capture);
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
    return !AsyncWork.moreAsyncWork(outcome);
  }

  /**
   * The result of a {@code DeferredResult}, of an emitter's among others: a failure is noted, an
   * emitter registered ({@link #emitterResult}).
   */
  @Override
  public <T> void postProcess(
      NativeWebRequest request, DeferredResult<T> deferredResult, Object concurrentResult) {
    if (concurrentResult instanceof Throwable failure) {
      call.asyncFailed(failure);
    }
    emitterResult(concurrentResult);
  }

  /**
   * An async result that is an emitter (or an entity of one: a {@code Callable}'s, a later
   * stage's), which Spring MVC starts on the request's next dispatch: a stream, registered as the
   * handler's own emitter would be, so that a timeout or a shutdown that cuts it short before it
   * sent waits for its end ({@link StreamEnd#awaitEmitterEnd}). One whose request a timeout
   * detached gets no dispatch: the work follows it itself ({@link AsyncWork#lateResult}).
   */
  private void emitterResult(@Nullable Object concurrentResult) {
    Object value =
        concurrentResult instanceof ResponseEntity<?> entity ? entity.getBody() : concurrentResult;
    if (value instanceof ResponseBodyEmitter emitter && !work.detached()) {
      call.returnsAStream();
      work.streamEnd().returnsAnEmitter(emitter);
    }
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
  private static @Nullable CapturingResponse captureOf(NativeWebRequest request) {
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
  private @Nullable LateResponse lateResponseOf(
      NativeWebRequest request, @Nullable CapturingResponse capture) {
    HttpServletRequest servletRequest = request.getNativeRequest(HttpServletRequest.class);
    return servletRequest == null || capture == null
        ? null
        : LateResponse.of(servletRequest, capture, handler, capture.limit());
  }

  /**
   * Answers the timed-out client of a detached call with a 409 and ends its request, the key still
   * claimed; once.
   */
  private void answer409(NativeWebRequest request) throws IOException {
    answer409(request, true);
  }

  /**
   * @param once whether only if the client was not answered yet; else written again, unless the
   *     response went out ({@link #answerTakenOverTask}: the timeout's answer did not end the
   *     request)
   */
  private void answer409(NativeWebRequest request, boolean once) throws IOException {
    HttpServletRequest servletRequest = request.getNativeRequest(HttpServletRequest.class);
    CapturingResponse capture = captureOf(request);
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
                + (rejectedWorkTaken
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
