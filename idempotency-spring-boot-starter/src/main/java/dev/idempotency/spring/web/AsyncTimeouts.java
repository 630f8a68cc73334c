package dev.idempotency.spring.web;

import dev.idempotency.spring.web.TimeoutDecision.Timeout;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.lang.reflect.Method;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
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
 * with one WARN per handler ({@link TimeoutDecision#warnUnfollowed}).
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
 *
 * <p>This interceptor hears Spring MVC's callbacks; what the timeout means for the call is decided
 * once by its {@link TimeoutDecision}, and the async dispatch of a request whose work outlives it
 * is answered by its {@link AsyncDispatches}.
 */
final class AsyncTimeouts
    implements CallableProcessingInterceptor, DeferredResultProcessingInterceptor {

  /** The key under which it is registered on the request's async manager. */
  static final String KEY = AsyncTimeouts.class.getName();

  private static final Logger log = LoggerFactory.getLogger(AsyncTimeouts.class);

  private final EndpointCall call;
  private final AsyncWork work;
  private final TimeoutDecision decision;
  private final AsyncDispatches dispatches;

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
    this.decision = new TimeoutDecision(call, handler, warnedUnfollowed, graceRunsOut);
    this.dispatches = new AsyncDispatches(work, decision, headerName);
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
      decided = decision.decide(request);
    } catch (RuntimeException e) {
      // Spring's own timeout handling, next, must still run; a result not stored is logged
      log.debug("The starter's timeout handling of an idempotent endpoint failed", e);
      return;
    }
    if (decided == Timeout.NOT_DETACHED) {
      DeferredResult<?> deferred = decision.deferredResult();
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
   * The executor that was to run the work refused its task: taken over as at a timeout ({@link
   * TimeoutDecision#workRejected}).
   *
   * @return true if the work was queued, not yet begun, and is now taken over
   */
  boolean workRejected(NativeWebRequest request) {
    return decision.workRejected(request);
  }

  /** See {@link AsyncDispatches#answerRejectedWork}. */
  boolean answerRejectedWork(NativeWebRequest request) throws IOException {
    return dispatches.answerRejectedWork(request);
  }

  /** See {@link AsyncDispatches#answerTakenOverTask}. */
  boolean answerTakenOverTask(NativeWebRequest request, WebAsyncManager manager)
      throws IOException {
    return dispatches.answerTakenOverTask(request, manager);
  }

  /** See {@link AsyncDispatches#answerDetachedOutcome}. */
  boolean answerDetachedOutcome(NativeWebRequest request, WebAsyncManager manager)
      throws IOException {
    return dispatches.answerDetachedOutcome(request, manager);
  }

  /** See {@link AsyncDispatches#outcomeReplaced}. */
  boolean outcomeReplaced(NativeWebRequest request, WebAsyncManager manager) {
    return dispatches.outcomeReplaced(request, manager);
  }

  /** Notes that the work is a {@code Callable}'s, whose result reaches {@link #postProcess}. */
  @Override
  public <T> void beforeConcurrentHandling(NativeWebRequest request, Callable<T> task) {
    decision.callableRound();
  }

  /** Notes the {@code DeferredResult} that Spring MVC drives, for a result that races a timeout. */
  @Override
  public <T> void beforeConcurrentHandling(
      NativeWebRequest request, DeferredResult<T> deferredResult) {
    decision.deferredRound(deferredResult);
  }

  @Override
  public <T> Object handleTimeout(NativeWebRequest request, Callable<T> task) throws Exception {
    Timeout decided = decision.decide(request);
    if (decided == Timeout.STREAM_CUT || decided == Timeout.STREAM_AWAITED) {
      return RESULT_NONE; // Spring's timeout handling ends the request; the stream's call too
    }
    if (decided == Timeout.DETACHED) {
      dispatches.answer409(request);
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
    Timeout decided = decision.decide(new ServletWebRequest(servletRequest, servletResponse));
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
    Timeout decided = decision.decide(request);
    if (decided == Timeout.STREAM_CUT || decided == Timeout.STREAM_AWAITED) {
      return true; // Spring's timeout handling ends the stream; the call is recorded
    }
    // a CompletionStage (adapted to a DeferredResult by Spring MVC) and an application's own
    // DeferredResult (seen through a copy: IdempotentEndpointAdvisor) report their late results
    // themselves; any other fails closed, detached all the same (warnUnfollowed)
    if (decided == Timeout.DETACHED) {
      dispatches.answer409(request);
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
      dispatches.takenOverTaskEnded(concurrentResult);
      return;
    }
    if (concurrentResult instanceof Throwable failure) {
      call.asyncFailed(failure);
    }
    emitterResult(concurrentResult);
    work.lateResult(concurrentResult);
    dispatches.callableOutcome(concurrentResult); // what its dispatch must carry (outcomeReplaced)
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
}
