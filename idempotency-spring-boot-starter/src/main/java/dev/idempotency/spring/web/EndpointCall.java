package dev.idempotency.spring.web;

import dev.idempotency.spring.PendingCall;
import java.io.IOException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import org.jspecify.annotations.Nullable;
import org.slf4j.LoggerFactory;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.http.HttpStatusCode;
import org.springframework.http.ProblemDetail;
import org.springframework.http.ResponseEntity;
import org.springframework.web.ErrorResponse;
import org.springframework.web.bind.annotation.ResponseStatus;
import org.springframework.web.context.request.async.AsyncRequestNotUsableException;
import org.springframework.web.util.DisconnectedClientHelper;

/**
 * One claimed {@link IdempotentEndpoint} request, from the claim (in the interceptor) to the
 * response the client got (after the handler, an async result or an error page): whether the
 * handler started, and what to store or release. Kept in a request attribute, so that every
 * dispatch of the request (request, async, error) finds it. Reported once; the first report wins.
 */
final class EndpointCall {

  /** The request attribute that holds the call. */
  static final String ATTRIBUTE = EndpointCall.class.getName();

  private final PendingCall<StoredResponse> call;
  private final List<String> headers;
  private final Duration maxWait;
  private final AtomicBoolean reported = new AtomicBoolean();
  private volatile boolean handlerStarted;
  private volatile @Nullable CapturingResponse awaitingErrorPage;
  private volatile @Nullable CapturingResponse response;
  private volatile @Nullable Throwable asyncFailure;
  private volatile int streamTimedOutStatus = -1;
  private PendingCall.@Nullable Scope mdc;
  private volatile @Nullable LateResponse late;
  private volatile boolean lateResultObserved;
  private volatile @Nullable Class<?> returnedClass;
  private @Nullable Object earlyResult = NO_RESULT; // guarded by this
  private Work work = Work.NONE; // guarded by this

  /** The handler's {@code Callable} work, queued in Spring MVC's async executor. */
  private enum Work {
    /** No {@code Callable} (a synchronous handler, a stage, a {@code DeferredResult}). */
    NONE,
    /** Returned, its task not yet run by the executor. */
    QUEUED,
    /** Its task began: from now on its send may happen. */
    STARTED,
    /** Its task was cancelled at a timeout before it began: it never runs. */
    ABANDONED
  }

  /** {@link #earlyResult} before a result came. */
  static final Object NO_RESULT = new Object();

  EndpointCall(PendingCall<StoredResponse> call, List<String> headers, Duration maxWait) {
    this.call = call;
    this.headers = headers;
    this.maxWait = maxWait;
  }

  /** The handler method was entered: its response is the endpoint's answer. */
  void handlerStarted() {
    handlerStarted = true;
  }

  /**
   * The claimed request's response: from now on it holds the body back, or, for a stream, copies
   * it; a stream that grows past the bound is recorded at once ({@link #streamPastBound}).
   */
  void capture(CapturingResponse response) {
    this.response = response;
    response.startCapture(() -> streamPastBound(response));
  }

  /** The handler returned a stream ({@code ResponseBodyEmitter}, {@code StreamingResponseBody}). */
  void returnsAStream() {
    CapturingResponse captured = response;
    if (captured != null) {
      captured.streamingResult();
    }
  }

  /**
   * The async result was a failure (set by the handler, a timeout or the container): a stream that
   * went out partly and failed because the client went away is cut short, not failed.
   */
  void asyncFailed(Throwable failure) {
    CapturingResponse captured = response;
    if (captured != null && captured.passedOn() && isDisconnect(failure)) {
      captured.cutShort();
    }
    asyncFailure = failure;
  }

  /**
   * A container async timeout ended the request of a stream (the handler returned one, or part of
   * its response went out) whose work may still send: Spring answers the client, and the call is
   * recorded as answered without its body if {@code status}, the response's status when the timeout
   * came, is one that is stored; a retry then gets {@code 422 response-not-stored}, never a second
   * send.
   */
  void streamTimedOut(int status) {
    streamTimedOutStatus = status;
  }

  /** Whether {@code failure} says the client went away. */
  static boolean isDisconnect(Throwable failure) {
    return failure instanceof AsyncRequestNotUsableException
        || DisconnectedClientHelper.isClientDisconnectedException(failure);
  }

  /**
   * A stream grew past the bound: recorded now as answered without its body (a repeat gets {@code
   * 422 response-not-stored} while it still streams), as WebFlux does; it goes on to the client.
   */
  private void streamPastBound(CapturingResponse captured) {
    if (late != null
        || !handlerStarted
        || !isStored(captured.getStatus())
        || !reported.compareAndSet(false, true)) {
      return;
    }
    call.complete(StoredResponse.capture(captured, null, headers));
  }

  /**
   * An exception ended the request's dispatch: a response cut short after part of it went out (the
   * client went away) is recorded as answered without its body, since the handler answered; any
   * other failure releases the key.
   */
  void failed(@Nullable CapturingResponse captured, Throwable failure) {
    if (captured != null
        && handlerStarted
        && captured.passedOn()
        && isStored(captured.getStatus())
        && (captured.wasCutShort() || isDisconnect(failure))) {
      captured.cutShort();
      recordCutShort(captured);
      return;
    }
    if (captured != null) {
      captured.discard();
    }
    release("the handler threw " + failure.getClass().getName());
  }

  private void recordCutShort(CapturingResponse captured) {
    if (late == null && reported.compareAndSet(false, true)) {
      call.completeAndAwait(StoredResponse.capture(captured, null, headers), maxWait);
    }
  }

  /** The handler returned {@code Callable} work, which Spring MVC's async executor will run. */
  synchronized void workQueued() {
    work = Work.QUEUED;
  }

  /**
   * The {@code Callable} work is about to begin on its task thread.
   *
   * @return false if a timeout abandoned it first (Spring MVC cancelled its task): it must not run
   */
  synchronized boolean workStarts() {
    if (work == Work.ABANDONED) {
      return false;
    }
    work = Work.STARTED;
    return true;
  }

  /**
   * Whether the key's lease still holds for the work about to begin (renewed now if it is due): a
   * task that waited in Spring MVC's queue longer than the lease, or while renewals failed, must
   * not send, since another request may have taken the key over.
   */
  boolean leaseHeld() {
    return !call.claimed() || call.context().leaseHeld();
  }

  boolean reported() {
    return reported.get() || late != null;
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
   * #lateResult}), is rendered with {@code late} and stored.
   *
   * <p>{@code Callable} work still queued in Spring MVC's async executor is abandoned instead: at a
   * timeout Spring MVC cancels its task, so it never runs and nothing is sent; the request's own
   * end releases the key ({@link #finish}), so that a retry runs the handler again.
   *
   * @return false if the call was already reported, its handler never started, its result came
   *     already (it is the request's answer: {@link #earlyResult}) or its work never began
   */
  synchronized boolean detach(LateResponse late) {
    if (reported.get() || !handlerStarted || this.late != null || earlyResult != NO_RESULT) {
      return false;
    }
    if (work == Work.QUEUED) {
      work = Work.ABANDONED;
      return false;
    }
    this.late = late;
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
      if (reported.get() || !handlerStarted || this.late != null || earlyResult == NO_RESULT) {
        return false;
      }
      this.late = late;
      result = earlyResult;
    }
    lateResult(result);
    return true;
  }

  /**
   * The async result of a handler, called for every one; stored (or, for a failure, released) only
   * if its request timed out before it came ({@link #detach}). A failure is resolved to a status as
   * on the synchronous path ({@link #statusOf}): a 4xx that is kept is stored with its problem
   * detail (a {@code ResponseStatusException(404)} is a stored 404), anything else releases.
   */
  void lateResult(@Nullable Object result) {
    LateResponse response;
    synchronized (this) {
      response = late;
      if (response == null) {
        earlyResult =
            result; // on its way to the request's own dispatch; a timeout must not drop it
        return;
      }
    }
    if (!reported.compareAndSet(false, true)) {
      return;
    }
    Object toRender = result;
    if (result instanceof Throwable failure) {
      int status = statusOf(failure);
      if (!isStored(status)) {
        call.fail(
            new NotStored(
                "the async result failed after its request timed out: "
                    + failure.getClass().getName()
                    + " (status "
                    + status
                    + ")"));
        return;
      }
      toRender = ResponseEntity.status(status).body(problemOf(failure, status));
    }
    try {
      StoredResponse stored = response.render(toRender, headers);
      if (isStored(stored.status())) {
        call.complete(stored);
      } else {
        call.fail(new NotStored("status " + stored.status() + " is not stored"));
      }
    } catch (RuntimeException | Error e) {
      LoggerFactory.getLogger(EndpointCall.class)
          .warn("The late result of a timed-out idempotent request could not be stored", e);
      throw e;
    }
  }

  /**
   * The async result that came before any timeout ({@link #lateResult}), or {@link #NO_RESULT}: a
   * timeout that races with it answers with it.
   */
  synchronized @Nullable Object earlyResult() {
    return earlyResult;
  }

  /**
   * The application called sendError: the error page, in an error dispatch, is the answer.
   *
   * @param response the response of the dispatch that called it, with its status and headers
   */
  void awaitErrorPage(CapturingResponse response) {
    awaitingErrorPage = response;
  }

  boolean awaitingErrorPage() {
    return awaitingErrorPage != null && !reported.get();
  }

  /**
   * The container ended the request. A call still waiting for its error page got none the filter
   * could see (the container wrote its own): its status is stored without a body, since the handler
   * did answer; any other call not yet reported is released.
   */
  void requestEnded() throws IOException {
    if (late != null) {
      return; // timed out: the async result reports
    }
    CapturingResponse response = awaitingErrorPage;
    CapturingResponse captured = this.response;
    if (response != null && handlerStarted) {
      finish(response, false);
    } else if (captured != null
        && handlerStarted
        && captured.passedOn()
        && isStored(captured.getStatus())
        && (captured.wasCutShort() || asyncFailure == null)) {
      recordCutShort(captured); // part of it went out; the container ended the rest
    } else {
      release("the request ended without a response to store");
    }
  }

  /** Puts the call's MDC entries on the request's thread while the handler runs. */
  void enterMdc() {
    mdc = call.enter();
  }

  void leaveMdc() {
    PendingCall.Scope scope = mdc;
    mdc = null;
    if (scope != null) {
      scope.close();
    }
  }

  /**
   * The request ended or failed without a response to store: release the key, so that a retry runs
   * the handler again.
   */
  void release(String why) {
    if (late == null && reported.compareAndSet(false, true)) {
      call.failAndAwait(new NotStored(why), maxWait);
    }
  }

  /**
   * The client's response is final: store it if the handler started and its status is one to keep,
   * else release; then send what was held back to the client. Waits (bounded) for the outcome to be
   * written first, so that a repeat the client sends at once is a replay (or, after a release,
   * runs).
   *
   * @param response the response holding the final body (the error dispatch's, after an error page)
   */
  void finish(CapturingResponse response) throws IOException {
    finish(response, true);
  }

  private void finish(CapturingResponse response, boolean bodySeen) throws IOException {
    try {
      if (late != null || !reported.compareAndSet(false, true)) {
        return;
      }
      int status = response.getStatus();
      // each waits (bounded) for the outcome: a retry the client sends at once finds the key
      // stored or free
      if (!handlerStarted) {
        call.failAndAwait(
            new NotStored("the handler did not start (status " + status + ")"), maxWait);
      } else if (workAbandoned()) {
        call.failAndAwait(
            new NotStored("the handler's work timed out before it began (" + status + ")"),
            maxWait);
      } else if (streamTimedOutStatus >= 0 && isStored(streamTimedOutStatus)) {
        // whatever Spring answered at the timeout (503), the stream's work may still send
        call.completeAndAwait(StoredResponse.capture(response, null, headers), maxWait);
      } else if (!isStored(status)) {
        call.failAndAwait(new NotStored("status " + status + " is not stored"), maxWait);
      } else if (response.wasCutShort()) {
        // part of it went out and the rest never will: answered, but not a response to replay
        call.completeAndAwait(StoredResponse.capture(response, null, headers), maxWait);
      } else if (response.streamed() && asyncFailure != null) {
        call.failAndAwait(
            new NotStored("the handler's stream failed: " + asyncFailure.getClass().getName()),
            maxWait);
      } else {
        byte[] body = response.overflowed() ? null : response.body();
        StoredResponse stored = StoredResponse.capture(response, body, headers);
        call.completeAndAwait(bodySeen ? stored : stored.withoutBody(), maxWait);
      }
    } finally {
      response.release();
    }
  }

  private synchronized boolean workAbandoned() {
    return work == Work.ABANDONED;
  }

  /**
   * The status Spring MVC resolves {@code failure} to, as on the synchronous path: an {@link
   * ErrorResponse}'s (a {@code ResponseStatusException}'s), a {@link ResponseStatus} on its class,
   * else 500.
   */
  static int statusOf(Throwable failure) {
    if (failure instanceof ErrorResponse error) {
      return error.getStatusCode().value();
    }
    ResponseStatus annotated =
        AnnotatedElementUtils.findMergedAnnotation(failure.getClass(), ResponseStatus.class);
    return annotated != null ? annotated.code().value() : 500;
  }

  private static ProblemDetail problemOf(Throwable failure, int status) {
    if (failure instanceof ErrorResponse error) {
      return error.getBody();
    }
    ResponseStatus annotated =
        AnnotatedElementUtils.findMergedAnnotation(failure.getClass(), ResponseStatus.class);
    String reason = annotated != null && !annotated.reason().isEmpty() ? annotated.reason() : null;
    return ProblemDetail.forStatusAndDetail(HttpStatusCode.valueOf(status), reason);
  }

  /** 2xx, 3xx and 4xx are final answers, except the 4xx that mean "try again". */
  static boolean isStored(int status) {
    if (status >= 200 && status < 400) {
      return true;
    }
    return status >= 400
        && status < 500
        && status != 408
        && status != 409
        && status != 425
        && status != 429;
  }

  /** Why a response was not stored: the key is released with it. */
  static final class NotStored extends RuntimeException {
    private static final long serialVersionUID = 1L;

    NotStored(String why) {
      super(why, null, false, false);
    }
  }
}
