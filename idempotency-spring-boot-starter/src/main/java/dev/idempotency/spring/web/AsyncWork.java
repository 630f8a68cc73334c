package dev.idempotency.spring.web;

import dev.idempotency.spring.PendingCall;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BooleanSupplier;
import org.jspecify.annotations.Nullable;
import org.springframework.http.ResponseEntity;
import org.springframework.web.context.request.async.DeferredResult;
import org.springframework.web.context.request.async.WebAsyncTask;
import org.springframework.web.servlet.mvc.method.annotation.ResponseBodyEmitter;
import org.springframework.web.servlet.mvc.method.annotation.StreamingResponseBody;

/**
 * The async work of one claimed {@link IdempotentEndpoint} request as a container async timeout
 * sees it (SPEC 13: a timeout ends the request, not the send): a {@code Callable}'s task queued,
 * started, taken over by the starter or abandoned; a result that came just before the timeout; and,
 * once the timeout detached the request from its work ({@link #detach}), the work's late result,
 * rendered and stored. Part of its {@link EndpointCall}, whose report it shares: the first report
 * wins; the end of a stream that outlives its request before it wrote is its {@link StreamEnd}'s.
 */
final class AsyncWork {

  /** {@link #earlyResult} before a result came. */
  static final Object NO_RESULT = new Object();

  /** {@link #cutShort} when the call may no longer wait for its stream's end. */
  static final Object NOT_CUT = new Object();

  /** The handler's {@code Callable} work, queued in Spring MVC's async executor. */
  private enum Work {
    /** No {@code Callable} (a synchronous handler, a stage, a {@code DeferredResult}). */
    NONE,
    /** Returned, its task not yet run by the executor. */
    QUEUED,
    /** Its task began: from now on its send may happen. */
    STARTED,
    /**
     * A later stage's task (a stage that ran returned more async work), not yet run: never
     * abandoned and released, since a stage that ran may have sent.
     */
    REQUEUED,
    /**
     * Its task was cancelled at a timeout before it began and nothing could take it over (no
     * response to render its result with): it never runs.
     */
    ABANDONED,
    /**
     * Taken over at a timeout or a shutdown before its task began ({@link #takeOverQueuedWork}):
     * the starter runs it, detached from the request; Spring MVC's task never does.
     */
    TAKEN
  }

  /**
   * Work queued in Spring MVC's async executor that the starter can run itself instead, detached
   * from its request ({@link UninterruptedWork}).
   */
  interface Queued {
    /**
     * Runs the work on the starter's own threads (or, if they are all busy, on the caller's), and
     * reports its end to {@link #takenOverResult}.
     */
    void runDetached();

    /**
     * The guard's close grace is about to run out (a shutdown): a later {@code DeferredResult} the
     * work still awaits is expired now, as at its timeout, so that its end is recorded within the
     * grace ({@link UninterruptedWork}).
     */
    default void graceRunsOut() {}

    /**
     * The work runs on Spring MVC's task after all, never taken over: what was made ready to take
     * it over (a task the application's decorator wrapped) is ended.
     */
    default void notTakenOver() {}

    /**
     * A timeout or a shutdown detached the request from the work, which began on Spring MVC's task
     * ({@link #detach}, {@link #dispatchLost}): the request's async timeout is read now, while the
     * request is still async, to bound the wait for a later {@code DeferredResult} the work may
     * return ({@link #continueDetached}).
     */
    default void requestDetached() {}

    /**
     * The work began on Spring MVC's task, a timeout or a shutdown detached its request, and its
     * result is more async work, which Spring MVC never runs now (its request ended): the starter
     * runs it to its end, or awaits it, as it runs the later stages of work it took over ({@link
     * #runDetached}), and reports that end to {@link #takenOverResult}.
     *
     * @param result the work's result: more async work
     * @param laterStageRan whether the work that returned it is a later stage's
     */
    default void continueDetached(@Nullable Object result, boolean laterStageRan) {}

    /** For a stream's work, what it writes, detached from its request; null for a callable's. */
    @Nullable WrittenBody body();
  }

  /**
   * What follows a call's async outcome that Spring MVC will neither run nor follow ({@link
   * #followsWith}), made on the request's thread as its handler returns.
   */
  interface Follower {
    /** The starter's run of {@code outcome}, detached from the request. */
    Queued follow(@Nullable Object outcome);

    /**
     * The async result came and is not followed by the starter: what was made ready to follow it (a
     * task the application's decorator wrapped on the request's thread) is ended.
     */
    default void unused() {}
  }

  /** What a stream the starter took over writes: kept in memory up to the stored body's bound. */
  interface WrittenBody {
    /** Whether it has written any of its body yet. */
    boolean wrote();

    /** The body it wrote, or null if it grew past the bound. */
    byte @Nullable [] bytes();
  }

  private final PendingCall<StoredResponse> call;
  private final List<String> headers;
  private final AtomicBoolean reported;
  private final BooleanSupplier handlerStarted;
  private volatile @Nullable LateResponse late;
  private final StreamEnd streamEnd;
  private volatile boolean lateResultObserved;
  private boolean laterStageUnfollowed; // guarded by this
  private volatile @Nullable Class<?> returnedClass;
  private @Nullable Object earlyResult = NO_RESULT; // guarded by this
  private Work work = Work.NONE; // guarded by this
  private @Nullable Queued queued; // guarded by this: the work while it is QUEUED
  private @Nullable Queued requeued; // guarded by this: a later stage's Callable while REQUEUED
  private volatile @Nullable Queued taken; // the work the starter took over, once TAKEN
  // guarded by this: the Callable work that last began on Spring MVC's task (or the starter's run
  // of a handler's own stage's late result: continuedDetached), which runs the later
  // stages its result holds should a timeout or a shutdown detach its request (continueDetached)
  private @Nullable Queued begun;
  private volatile boolean laterStageTaken; // a refused later stage, taken over
  private boolean laterStageQueued; // guarded by this: a stage that ran returned more work
  // follows a replaced outcome that is more async work (followReplacedOutcome); null if none can
  private volatile @Nullable Follower follower;
  // guarded by this: the last async result that was more async work and came before any detach
  // (Spring MVC, not the starter, runs what follows it: followsDetached)
  private @Nullable Object onTimeWork;

  /**
   * @param call the claimed call, which the late result completes or fails
   * @param headers the response headers to store besides the usual ones
   * @param reported the call's report: set once, by whichever reports first
   * @param handlerStarted whether the handler method was entered
   */
  AsyncWork(
      PendingCall<StoredResponse> call,
      List<String> headers,
      AtomicBoolean reported,
      BooleanSupplier handlerStarted) {
    this.call = call;
    this.headers = headers;
    this.reported = reported;
    this.handlerStarted = handlerStarted;
    this.streamEnd = new StreamEnd(this, call, headers, reported);
  }

  /** The end of the call's stream, if it outlives its request before it wrote. */
  StreamEnd streamEnd() {
    return streamEnd;
  }

  /**
   * The response the work's result is rendered with, once a timeout (or a shutdown) detached the
   * request from its work; else null.
   */
  @Nullable LateResponse late() {
    return late;
  }

  /** Whether a timeout detached the request: the late result, not the request's end, reports. */
  boolean detached() {
    return late != null;
  }

  /**
   * The handler, or a stage of its work that ran, returned {@code Callable} work, which Spring
   * MVC's async executor will run: queued, or, after a stage that ran, requeued (never back to
   * queued).
   *
   * @param queued the work, which the starter runs itself if a timeout or a shutdown finds it still
   *     queued ({@link #takeOverQueuedWork}); only the first stage's is kept for that, and a later
   *     stage's {@code Callable} for a refusal by its executor ({@link #takeOverRefusedLaterStage})
   */
  synchronized void workQueued(Queued queued) {
    work = work == Work.STARTED || work == Work.REQUEUED ? Work.REQUEUED : Work.QUEUED;
    this.queued = work == Work.QUEUED ? queued : null;
    this.requeued = work == Work.REQUEUED && queued.body() == null ? queued : null;
    laterStageQueued |= work == Work.REQUEUED;
    laterStageUnfollowed = false; // Spring MVC followed the unfollowed stage to this work
  }

  /**
   * Whether a timeout now loses the result of a later stage of the work (more async work that a
   * stage which ran returned, so a send may have happened): it waits in Spring MVC's async
   * executor, where the timeout cancels its task, or it is one the starter does not follow (a
   * {@code CompletionStage}, a {@code DeferredResult}, an emitter), which Spring MVC expires or
   * cancels. False once the call is reported or detached, or if its handler never started.
   */
  synchronized boolean laterStageLost() {
    return (work == Work.REQUEUED || laterStageUnfollowed)
        && !reported.get()
        && late == null
        && handlerStarted.getAsBoolean();
  }

  /**
   * The {@code Callable} work is about to begin on its task thread.
   *
   * @return false if a timeout abandoned it first (Spring MVC cancelled its task), or the starter
   *     took it over ({@link #takeOverQueuedWork}): Spring MVC's task must not run it
   */
  synchronized boolean workStarts() {
    if (work == Work.ABANDONED || work == Work.TAKEN) {
      return false;
    }
    begun = work == Work.QUEUED ? queued : requeued;
    work = Work.STARTED;
    queued = null;
    requeued = null;
    return true;
  }

  /** Whether a timeout abandoned the {@code Callable} work before its task began. */
  synchronized boolean workAbandoned() {
    return work == Work.ABANDONED;
  }

  /** The handler returned a result that tells {@link #lateResult} when it ends (a stage). */
  void observesLateResult() {
    lateResultObserved = true;
  }

  /** Whether a timeout may {@link #detach}: something will report the late result. */
  boolean lateResultObserved() {
    return lateResultObserved;
  }

  /** The handler method returned {@code returned} (before the advisor adapted it). */
  void handlerReturned(@Nullable Object returned) {
    returnedClass = returned == null ? null : returned.getClass();
  }

  /** The runtime class of what the handler method returned, or null (nothing, or not yet). */
  @Nullable Class<?> returnedClass() {
    return returnedClass;
  }

  /**
   * The request timed out while the handler's async work runs: from now on the request's own end
   * reports nothing (the key stays claimed), and the work's result, when it comes ({@link
   * #lateResult}), is rendered with {@code late} and stored. Work still queued in Spring MVC's
   * async executor is not detached but taken over, by {@link #takeOverQueuedWork}, which the caller
   * asks first.
   *
   * @return false if the call was already reported, its handler never started, or its result came
   *     already (it is the request's answer: {@link #earlyResult})
   */
  synchronized boolean detach(LateResponse late) {
    if (reported.get()
        || !handlerStarted.getAsBoolean()
        || this.late != null
        || earlyResult != NO_RESULT) {
      return false;
    }
    this.late = late;
    requestDetached();
    return true;
  }

  /** The request was detached from work that began: see {@link Queued#requestDetached}. */
  private void requestDetached() { // guarded by this
    Queued work = begun;
    if (work != null) {
      work.requestDetached();
    }
  }

  /**
   * Whether the call may still wait for the end of its stream: not reported, its handler started,
   * not detached ({@link StreamEnd#awaitEmitterEnd} asks before it observes the emitter).
   */
  synchronized boolean mayBeCutShort() {
    return !reported.get() && handlerStarted.getAsBoolean() && late == null;
  }

  /**
   * The call's stream was cut short before it wrote ({@link StreamEnd#awaitStreamEnd}, {@link
   * StreamEnd#awaitEmitterEnd}): from now on its outcome waits for the stream's end, rendered with
   * {@code late}, and the request's own end reports nothing.
   *
   * @param wrote whether the stream has written any of its body by then
   * @param streamWork whether the stream's work must be a {@code StreamingResponseBody}'s that
   *     began
   * @return the result that came already, waiting for its dispatch ({@link #NO_RESULT} if none), or
   *     {@link #NOT_CUT} if the call was reported or detached already, its handler never started,
   *     or its work is not one that began
   */
  synchronized @Nullable Object cutShort(
      LateResponse late, BooleanSupplier wrote, boolean streamWork) {
    if (reported.get()
        || !handlerStarted.getAsBoolean()
        || this.late != null
        || (streamWork && work != Work.STARTED)) {
      return NOT_CUT;
    }
    this.late = late;
    streamEnd.awaits(wrote);
    return earlyResult;
  }

  /**
   * The result of work that outlived its request (taken over by the starter, or detached at a
   * timeout or a shutdown) is an emitter (or an entity of one, or a {@code DeferredResult} or
   * future the work returned already set to one: {@link SettledResults}), which Spring MVC never
   * gets: the starter follows it to its end ({@link StreamEnd#followLaterEmitter}). Only a first
   * stage's emitter: once a later stage ran, which may have sent, any end is recorded as answered
   * ({@link #takenOverResult}).
   *
   * @return false if the result is no emitter, a later stage's, the call was reported, or the
   *     emitter cannot be followed (the caller then records it as answered)
   */
  private boolean awaitLaterEmitterEnd(@Nullable Object result, boolean laterStageRan) {
    // in a ResponseEntity, or in a DeferredResult or future the stage that returned it had set
    Object value = SettledResults.ownValue(result);
    if (!(value instanceof ResponseBodyEmitter returned)) {
      return false;
    }
    LateResponse response;
    synchronized (this) {
      response = late;
      if (response == null
          || reported.get()
          || laterStageRan
          || laterStageTaken
          || laterStageQueued
          || streamEnd.awaitsStreamEnd()) {
        return false;
      }
    }
    return streamEnd.followLaterEmitter(response, returned);
  }

  /**
   * What follows the work's own outcome to its end should it be more async work that Spring MVC
   * will neither run nor follow ({@link #followReplacedOutcome}): given, for each outcome, the
   * starter's run of it, detached from the request, as work it took over is run ({@link
   * UninterruptedWork}). Set as the handler returns; without it such an outcome is not followed.
   */
  void followsWith(Follower follower) {
    this.follower = follower;
  }

  /**
   * The work's own outcome was replaced before its async dispatch ({@link
   * AsyncTimeouts#outcomeReplaced}: an application's async interceptor that fails in {@code
   * postProcess}), and that outcome is more async work (a {@code CompletionStage} completed or
   * under way, a {@code DeferredResult}, a {@code Callable}, an emitter), which Spring MVC, having
   * dispatched the replacement, will neither run nor follow. The work that produced it ran and may
   * have sent, so neither releasing the key nor recording the replacement is safe: the starter
   * follows the outcome to its end as it runs work it took over ({@link #takeOverQueuedWork}),
   * detached from the request, the key claimed meanwhile, and that end is decided as a taken-over
   * run's ({@link #takenOverResult}): a value stored, a failure through the application's exception
   * resolvers (one nothing maps releases the key). Spring MVC's side reports nothing more ({@link
   * #lateResult} ignores it, as for work taken over).
   *
   * @param late the response the outcome is rendered with
   * @param outcome the work's own outcome
   * @return false if nothing can follow it ({@link #followsWith}), or the call was reported or
   *     detached already, its handler never started, or a final result came already
   */
  boolean followReplacedOutcome(LateResponse late, @Nullable Object outcome) {
    Follower follow = follower;
    if (follow == null) {
      return false;
    }
    Queued following = follow.follow(outcome);
    synchronized (this) {
      if (reported.get()
          || !handlerStarted.getAsBoolean()
          || this.late != null
          || earlyResult != NO_RESULT) {
        return false;
      }
      work = Work.TAKEN;
      queued = null;
      requeued = null;
      taken = following;
      this.late = late;
    }
    following.runDetached();
    return true;
  }

  /**
   * A timeout came after the {@code Callable} work's result ({@link #earlyResult}) but before
   * Spring MVC dispatched it, and another answer may win the request (an application's timeout
   * fallback): the send happened, so the result is stored now, as a late one, and the request's own
   * end reports nothing.
   *
   * @return false if no result came, or the call is reported or detached already
   */
  boolean detachWithEarlyResult(LateResponse late) {
    Object result;
    synchronized (this) {
      if (reported.get()
          || !handlerStarted.getAsBoolean()
          || this.late != null
          || earlyResult == NO_RESULT) {
        return false;
      }
      this.late = late;
      result = earlyResult;
    }
    lateResult(result);
    return true;
  }

  /**
   * A timeout found the work still queued and it cannot be taken over ({@link #takeOverQueuedWork}:
   * there is no response to render its result with, which a claimed request always has): Spring MVC
   * cancels its task, and abandoned it never runs ({@link #workStarts}), so the request's own end
   * releases the key ({@link EndpointCall#finish(CapturingResponse)}, through {@link
   * #workAbandoned}).
   *
   * @return true if the work was queued, not yet begun, and is now abandoned
   */
  synchronized boolean abandonQueuedWork() {
    if (reported.get() || !handlerStarted.getAsBoolean() || late != null || work != Work.QUEUED) {
      return false;
    }
    work = Work.ABANDONED;
    return true;
  }

  /**
   * The one entry point of the rule for work queued in Spring MVC's async executor (a {@code
   * Callable}'s, a {@code WebAsyncTask}'s, a {@code StreamingResponseBody}'s) whose request will
   * never get its dispatch: the request timed out (Spring MVC cancels the task) or the server
   * stopped (SPEC 13, 14). The handler method ran, and may have sent before it returned the work,
   * while the work may be the send: neither releasing the key nor keeping it without running the
   * work is safe. So the starter takes the work over: marked taken (Spring MVC's task, if it still
   * begins, does not run it: {@link #workStarts}), it runs on the starter's own threads, detached
   * from the request as at any timeout ({@link #detach}, {@code late}), the key claimed meanwhile.
   * Its end is decided as a synchronous handler's would be ({@link #takenOverResult}). Asked before
   * anything else is decided ({@link #detach}, {@link #dispatchLost}, a stream cut short).
   *
   * @param late the response as the handler left it when the work went async
   * @return true if the work was queued, not yet begun, and is now taken over
   */
  boolean takeOverQueuedWork(LateResponse late) {
    Queued taken;
    synchronized (this) {
      if (reported.get()
          || !handlerStarted.getAsBoolean()
          || this.late != null
          || work != Work.QUEUED
          || queued == null) {
        return false;
      }
      taken = queued;
      work = Work.TAKEN;
      queued = null;
      this.taken = taken;
      this.late = late;
      WrittenBody body = taken.body();
      if (body != null) { // a stream's end is decided as one cut short, its body kept if it fits
        streamEnd.takenOver(body);
      }
    }
    taken.runDetached();
    return true;
  }

  /**
   * The guard's close grace is about to run out (a shutdown): work the starter took over that still
   * awaits a later {@code DeferredResult} expires it now ({@link Queued#graceRunsOut}).
   */
  void takenOverGraceRunsOut() {
    Queued work = taken;
    if (work == null) {
      synchronized (this) {
        work = begun; // detached: its later stages, if any, run on the starter's threads
      }
    }
    if (work != null) {
      work.graceRunsOut();
    }
  }

  /**
   * The end of work the starter took over ({@link #takeOverQueuedWork}): its result, or its
   * failure. A first stage's end is decided as a synchronous handler's would be: a result is
   * rendered and stored (a stream's normal end with what it wrote, kept in memory up to the bound
   * of a stored body, else without its body: a retry gets {@code 422 response-not-stored}), a
   * failure goes through the application's exception resolvers (one nothing maps releases the key),
   * a stream's failure before it wrote releases the key. Once a later stage ran ({@code
   * laterStageRan}: the first stage's result was more async work, run too), a failure, or a result
   * that is more async work the starter does not run or follow to its end (an emitter a later stage
   * returned, a stream it wrote), is recorded as answered without its body: a stage that ran may
   * have sent. A {@code CompletionStage} or {@code DeferredResult} that the first stage returned is
   * awaited: its failure is decided as the first stage's would be (one nothing maps releases the
   * key). An emitter the first stage returned is followed to its end ({@link
   * #awaitLaterEmitterEnd}). The same for the later stages of a {@code Callable} that began on
   * Spring MVC's task and that a timeout or a shutdown detached ({@link #continuedDetached}).
   *
   * @param result the work's result, or its failure
   * @param laterStageRan whether the result is a later stage's
   */
  void takenOverResult(@Nullable Object result, boolean laterStageRan) {
    if (awaitLaterEmitterEnd(result, laterStageRan)) {
      return;
    }
    if (AsyncResultShapes.moreAsyncWork(result)
        || ((laterStageRan || laterStageTaken) && result instanceof Throwable)) {
      LateResponse response = late;
      if (response != null && reported.compareAndSet(false, true)) {
        streamEnd.record(response, NO_RESULT, true);
      }
      return;
    }
    lateResult(result, true);
  }

  /**
   * A later stage's {@code Callable} (more async work that a stage which ran returned) was refused
   * by its executor: it never began and never will, so it is taken over as a refused first stage is
   * ({@link #takeOverQueuedWork}): the starter runs it, detached from the request, the key claimed
   * until it ends; its result is rendered and stored, and its failure, since a stage that ran may
   * have sent, is recorded as answered without its body ({@link #takenOverResult}). Releasing or
   * recording the key now would lose the send if that stage is the send. A later stream is not
   * taken over ({@link #laterStageRejected}).
   *
   * @param late the response as the work left it when its stage went async
   * @return true if a later stage's {@code Callable} was waiting to begin and is now taken over
   */
  boolean takeOverRefusedLaterStage(LateResponse late) {
    Queued taken;
    synchronized (this) {
      if (reported.get()
          || !handlerStarted.getAsBoolean()
          || this.late != null
          || work != Work.REQUEUED
          || requeued == null) {
        return false;
      }
      taken = requeued;
      requeued = null;
      this.taken = taken;
      work = Work.TAKEN;
      laterStageTaken = true;
      this.late = late;
    }
    taken.runDetached();
    return true;
  }

  /**
   * A later stage's work (more async work that a stage which ran returned: {@link #laterStageLost})
   * was refused by its executor and not taken over (a stream's): it never runs, and a stage that
   * ran may have sent, so the key is never released (the refusal, dispatched as the async result,
   * would release it): the call is recorded now as answered without its body, from the status and
   * headers of {@code late}, as a later stage lost at a timeout is; a retry gets {@code 422
   * response-not-stored}, never a second send.
   *
   * @return false if there was no later stage to lose, or the call was reported already
   */
  boolean laterStageRejected(LateResponse late) {
    if (!laterStageLost() || !reported.compareAndSet(false, true)) {
      return false;
    }
    streamEnd.record(late, NO_RESULT, true);
    return true;
  }

  /** Whether the starter took the work over ({@link #takeOverQueuedWork}). */
  synchronized boolean takenOver() {
    return work == Work.TAKEN;
  }

  /**
   * The request's async dispatch, where its outcome would be written, will not come: the server
   * stopped while the work ran (SPEC 14). As at a timeout ({@link #detach}), the work's result is
   * rendered with {@code late} and recorded when it comes, or now if it came already and waited for
   * that dispatch. Work still queued in Spring MVC's async executor is taken over instead, by
   * {@link #takeOverQueuedWork}, which the caller asks first.
   *
   * @return false if there was nothing to do: reported, detached already (a timeout), or its
   *     handler never started
   */
  boolean dispatchLost(LateResponse late) {
    Object result;
    synchronized (this) {
      if (reported.get() || !handlerStarted.getAsBoolean() || this.late != null) {
        return false;
      }
      this.late = late;
      requestDetached();
      result = earlyResult;
    }
    if (result != NO_RESULT) {
      lateResult(result);
    }
    return true;
  }

  /**
   * The async result of a handler, called for every one; stored (or released) only if its request
   * timed out before it came ({@link #detach}), as Spring MVC would have answered it on time
   * ({@link LateResponse}): a failure through the application's exception resolvers, so that one
   * its {@code @ExceptionHandler} maps to a kept 4xx is stored, and one that nothing maps (a 500)
   * releases. A failure whose status cannot be resolved here is recorded as answered without its
   * response: the send happened, so a retry must not send again (SPEC 1). An emitter that came so
   * is followed to its end ({@link #awaitLaterEmitterEnd}); more async work that came so from a
   * {@code Callable} that began on Spring MVC's task is run to its end, or awaited, by the starter
   * ({@link #continuedDetached}).
   */
  void lateResult(@Nullable Object result) {
    lateResult(result, false);
  }

  /**
   * {@link #lateResult}; from work the starter took over if {@code takenOver}, else from Spring
   * MVC's side, which is ignored once the work was taken over (its task never ran the work).
   */
  private void lateResult(@Nullable Object result, boolean takenOver) {
    LateResponse response;
    BooleanSupplier wroteBody;
    synchronized (this) {
      if (work == Work.TAKEN && !takenOver) {
        return; // Spring MVC's task, cancelled or refused: the starter runs the work
      }
      response = late;
      wroteBody = streamEnd.wrote();
      if (response == null && AsyncResultShapes.moreAsyncWork(result)) {
        onTimeWork = result;
      }
      if (response == null) {
        Object value = result instanceof ResponseEntity<?> entity ? entity.getBody() : result;
        if (value instanceof DeferredResult<?>
            || value instanceof CompletionStage<?>
            || value instanceof ResponseBodyEmitter
            || AsyncResultShapes.singleReactiveValue(value)
            || AsyncResultShapes.reactiveStream(value)) {
          laterStageUnfollowed = true; // more async work, whose result a timeout loses
        } else if (!(value instanceof Callable<?>
            || value instanceof WebAsyncTask<?>
            || value instanceof StreamingResponseBody)) {
          earlyResult =
              result; // on its way to the request's own dispatch; a timeout must not drop it
        } else if (work == Work.NONE) {
          work = Work.STARTED; // a stage ran (a CompletionStage's): the next is never abandoned
        } // else more async work, shielded as the first stage was: its result is the work's
      }
    }
    if (response == null) {
      unfollowed(); // on time: Spring MVC runs what follows
      return;
    }
    if (!takenOver && wroteBody == null && awaitLaterEmitterEnd(result, false)) {
      unfollowed(); // followed by its stream's end, never by the follower
      return;
    }
    if (!takenOver && wroteBody == null && continuedDetached(result)) {
      return;
    }
    unfollowed();
    if (!reported.compareAndSet(false, true)) {
      return;
    }
    if (wroteBody != null) {
      streamEnd.record(response, result, wroteBody.getAsBoolean());
      return;
    }
    LateResultRecord.record(call, response, result, headers);
  }

  /**
   * The late result of {@code Callable} work that began on Spring MVC's task and that a timeout or
   * a shutdown detached is more async work (a {@code DeferredResult} an application thread sets
   * later, a {@code CompletionStage}, a later {@code Callable}), which Spring MVC never runs now:
   * rendered as it is, it would be stored as an empty answer before its own outcome came (a lost
   * send, if that outcome is a failure before sending). So the starter runs it to its end, or
   * awaits it, as it does the later stages of work it took over ({@link Queued#continueDetached}),
   * and that end is decided as theirs is ({@link #takenOverResult}); a stage after a later one
   * counts as a later stage's.
   *
   * <p>The same for the late result of a handler's own {@code CompletionStage} or {@code
   * DeferredResult} (no work began on Spring MVC's task): the starter's run of it ({@link
   * #followsWith}) continues it, and is kept where a shutdown's close grace reaches it ({@link
   * #takenOverGraceRunsOut}).
   *
   * @return false if the result is no more async work, the call was reported, or nothing can
   *     continue it (the result is rendered as it is)
   */
  private boolean continuedDetached(@Nullable Object result) {
    if (reported.get() || !AsyncResultShapes.moreAsyncWork(result)) {
      return false;
    }
    Queued work;
    boolean laterStage;
    synchronized (this) {
      if (begun == null && follower != null) {
        begun = follower.follow(result); // the thread context taken on the request's thread
      }
      work = begun;
      laterStage = laterStageQueued;
    }
    if (work == null) {
      return false;
    }
    work.continueDetached(result, laterStage);
    return true;
  }

  /**
   * Whether the starter runs (or awaits) {@code value}, more async work that the handler's own
   * {@code DeferredResult} or stage was set to, itself, detached from the request ({@link
   * #continuedDetached}), so that Spring MVC must not run it too: the call is detached, something
   * continues it, and the value did not reach {@link #lateResult} before the detach (then it is
   * Spring MVC's to run). Asked on an async dispatch that carries {@code value} ({@link
   * AsyncDispatches#answerDetachedOutcome}), and by the advisor before it hands a stage's value on
   * to Spring MVC; a value that has not reached {@link #lateResult} yet will, as a detached call's
   * late result.
   */
  synchronized boolean followsDetached(@Nullable Object value) {
    return late != null
        && AsyncResultShapes.moreAsyncWork(value)
        && onTimeWork != value
        && (begun != null || follower != null);
  }

  /**
   * An async result came that the starter does not follow: what its follower made ready on the
   * request's thread is ended ({@link Follower#unused}); a later follow decorates on its own
   * thread.
   */
  private void unfollowed() {
    Follower follow = follower;
    if (follow != null) {
      follow.unused();
    }
  }

  /**
   * The async result that came before any timeout ({@link #lateResult}), or {@link #NO_RESULT}: a
   * timeout that races with it answers with it.
   */
  synchronized @Nullable Object earlyResult() {
    return earlyResult;
  }
}
