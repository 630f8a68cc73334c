package dev.idempotency.spring.web;

import static dev.idempotency.spring.web.StoredStatuses.isStored;

import dev.idempotency.spring.PendingCall;
import dev.idempotency.spring.web.StoredStatuses.NotStored;
import java.io.IOException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import org.jspecify.annotations.Nullable;
import org.slf4j.LoggerFactory;
import org.springframework.web.context.request.async.AsyncRequestNotUsableException;
import org.springframework.web.util.DisconnectedClientHelper;

/**
 * One claimed {@link IdempotentEndpoint} request, from the claim (in the interceptor) to the
 * response the client got (after the handler, an async result or an error page): whether the
 * handler started, and what to store or release. Kept in a request attribute, so that every
 * dispatch of the request (request, async, error) finds it. Reported once; the first report wins.
 * What a container async timeout does to the handler's async work, which may outlive the request,
 * is its {@link AsyncWork}'s part.
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
  private volatile boolean valueNotWritten;
  private PendingCall.@Nullable Scope mdc;
  private final AsyncWork asyncWork;
  private volatile @Nullable BodyCachingRequest request;

  EndpointCall(PendingCall<StoredResponse> call, List<String> headers, Duration maxWait) {
    this.call = call;
    this.headers = headers;
    this.maxWait = maxWait;
    this.asyncWork = new AsyncWork(call, headers, reported, () -> handlerStarted);
  }

  /** The handler's async work, which a container async timeout may detach from this request. */
  AsyncWork asyncWork() {
    return asyncWork;
  }

  /** The most body bytes held back to store: the captured response's bound (0 before capture). */
  long bodyLimit() {
    CapturingResponse captured = response;
    return captured == null ? 0 : captured.limit();
  }

  /**
   * The claimed request, as the filter wrapped it: the handler's work reads it through this
   * wrapper, which answers from a copy once the request ends under work that goes on ({@link
   * #requestDestroyed}).
   */
  void request(BodyCachingRequest request) {
    this.request = request;
  }

  /**
   * The container is about to end the request and may recycle it next. If the handler's work goes
   * on without it (a timeout or a shutdown detached it, or the starter took it over: {@link
   * AsyncWork#detached}), the work's request answers from now on from a copy of it ({@link
   * BodyCachingRequest#outlivedByItsWork}; its uploaded parts from copies of their own, deleted
   * once the outcome is known), and its response is where its result is rendered from ({@link
   * CapturingResponse#outlivedByItsWork}), so that a work that reads its request or sets a header
   * on its response after its client was answered gets what it would have got on time, not a
   * failure that releases the key of work that may have sent. A request that ended otherwise (its
   * work ended, or was never detached) is left as it is: nothing is copied.
   */
  void requestDestroyed() {
    LateResponse late = asyncWork.late();
    if (late == null) {
      return;
    }
    BodyCachingRequest wrapped = request;
    if (wrapped != null) {
      try {
        wrapped.outlivedByItsWork();
      } catch (RuntimeException e) {
        // the container's own listener chain goes on; the work reads the request as it is
        LoggerFactory.getLogger(EndpointCall.class)
            .debug("The request of an idempotent endpoint's detached work could not be copied", e);
      }
      whenOutcomeKnown(wrapped::deleteCopies);
    }
    CapturingResponse captured = response;
    if (captured != null) {
      captured.outlivedByItsWork(late.workResponse());
    }
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
    response.startCapture(() -> streamPastBound(response), () -> streamRefused(response));
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

  /**
   * Spring MVC failed to write a value that the handler's async work produced, in the request's
   * async dispatch (a {@code Flux} it collected into a list whose element type its message
   * converter cannot tell, say: a 500): that work ran to its end and may have sent, so the call's
   * end is recorded as answered without its body, never released; a retry gets {@code 422
   * response-not-stored}, never a second send.
   */
  void valueNotWritten() {
    valueNotWritten = handlerStarted;
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
    if (asyncWork.detached()
        || !handlerStarted
        || !isStored(captured.getStatus())
        || !reported.compareAndSet(false, true)) {
      return;
    }
    call.complete(StoredResponse.capture(captured, null, headers));
  }

  /**
   * The container refused a write or flush of the stream the handler returned (a {@code
   * ResponseBodyEmitter}, a {@code StreamingResponseBody}): the client went away after part of it
   * went out. It is recorded now as answered without its body (or released, if its status is not
   * one to store), as the end of its async request would record it ({@link #asyncFailed}, {@link
   * #finish}): a retry gets {@code 422 response-not-stored}, never a second send. Recorded here, on
   * the writing thread, because that end may never come: when the write fails while the request's
   * first dispatch is still returning (the handler's stream began to send at once), Tomcat closes
   * the connection at the end of that dispatch and recycles the request without telling its async
   * listeners (it logs "Encountered a non-recycled request and recycled it forcedly"), so neither
   * Spring MVC's error handling nor its timeout reaches the starter, and the key would stay
   * claimed. A stream whose work a timeout or a shutdown detached is decided by its end ({@link
   * StreamEnd}).
   */
  private void streamRefused(CapturingResponse captured) {
    if (!captured.returnsAStream()
        || asyncWork.detached()
        || !handlerStarted
        || !reported.compareAndSet(false, true)) {
      return;
    }
    int status = captured.getStatus();
    if (isStored(status)) {
      call.complete(StoredResponse.capture(captured, null, headers));
    } else {
      call.fail(new NotStored("status " + status + " is not stored"));
    }
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
    if (valueNotWritten) {
      recordUnwritten(new StoredResponse(500, List.of(), null));
      return;
    }
    release("the handler threw " + failure.getClass().getName());
  }

  /** The work's value was not written ({@link #valueNotWritten}): answered, without its body. */
  private void recordUnwritten(StoredResponse answered) {
    if (!asyncWork.detached() && reported.compareAndSet(false, true)) {
      call.completeAndAwait(answered, maxWait);
    }
  }

  private void recordCutShort(CapturingResponse captured) {
    if (!asyncWork.detached() && reported.compareAndSet(false, true)) {
      call.completeAndAwait(StoredResponse.capture(captured, null, headers), maxWait);
    }
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
    return reported.get() || asyncWork.detached();
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
    if (asyncWork.detached()) {
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
    } else if (valueNotWritten) {
      recordUnwritten(new StoredResponse(500, List.of(), null));
    } else {
      release("the request ended without a response to store");
    }
  }

  /**
   * The server stopped while the request's async work ran, and its async dispatch, where the
   * outcome would be written, will not come: the work's result is recorded from the result itself,
   * as after a timeout ({@link AsyncWork#dispatchLost}); work still queued in Spring MVC's async
   * executor, which Spring MVC would never run now, is taken over: the starter runs it and records
   * its end, as after a timeout ({@link AsyncWork#takeOverQueuedWork}), within the guard's close
   * grace, whose close waits for it (a stream's, if it has not ended when the grace runs out, is
   * recorded on {@code graceRunsOut} as answered without its body). A stream whose work began may
   * still send: one that wrote nothing yet and whose end is heard of (a {@code
   * StreamingResponseBody}, the handler's own emitter) is decided at that end ({@link
   * StreamEnd#awaitStreamEnd}, {@link StreamEnd#awaitEmitterEnd}: its own failure releases the
   * key), or, if it has not ended when the guard's close grace runs out, on {@code graceRunsOut};
   * any other (one that wrote, an emitter whose end cannot be observed) is recorded now as answered
   * without its body, as after a timeout ({@link #streamTimedOut}): a retry gets {@code 422
   * response-not-stored}, never a second send.
   *
   * @param late the request as it went async, to render the result with
   * @param graceRunsOut runs its task shortly before the guard's close grace runs out
   */
  void dispatchLost(LateResponse late, java.util.function.Consumer<Runnable> graceRunsOut) {
    // work the starter took over (now or at an earlier timeout) that awaits a later
    // DeferredResult expires it before the grace runs out, its end recorded within the grace
    boolean tookOver = asyncWork.takeOverQueuedWork(late);
    graceRunsOut.accept(asyncWork::takenOverGraceRunsOut);
    if (tookOver) {
      if (asyncWork.streamEnd().awaitsStreamEnd()) {
        graceRunsOut.accept(asyncWork.streamEnd()::streamOutlivesTheGrace);
      }
      return; // the starter runs it, within the guard's close grace
    }
    if (asyncWork.streamEnd().awaitsStreamEnd()) {
      // a timeout cut it short before it wrote: its end decides, within the guard's grace
      graceRunsOut.accept(asyncWork.streamEnd()::streamOutlivesTheGrace);
      return;
    }
    CapturingResponse captured = response;
    if (captured != null
        && (captured.passedOn() || captured.returnsAStream() || asyncWork.laterStageLost())) {
      if (captured.returnsAStream()
          && !captured.wroteBody()
          && (asyncWork.streamEnd().awaitStreamEnd(late, captured::wroteBody)
              || asyncWork.streamEnd().awaitEmitterEnd(late, captured::wroteBody))) {
        graceRunsOut.accept(asyncWork.streamEnd()::streamOutlivesTheGrace);
        return;
      }
      // the server may have recycled the response: the status and headers are those it had when
      // the work went async
      if (handlerStarted
          && isStored(late.statusLeft())
          && !asyncWork.detached()
          && reported.compareAndSet(false, true)) {
        call.complete(late.leftWithoutBody(headers));
      }
      return;
    }
    asyncWork.dispatchLost(late);
  }

  /** Runs {@code action} once the call's outcome is known (written, released or abandoned). */
  void whenOutcomeKnown(Runnable action) {
    call.outcome().whenComplete((outcome, failure) -> action.run());
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
    if (!asyncWork.detached() && reported.compareAndSet(false, true)) {
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
      if (asyncWork.detached() || !reported.compareAndSet(false, true)) {
        return;
      }
      int status = response.getStatus();
      // each waits (bounded) for the outcome: a retry the client sends at once finds the key
      // stored or free
      if (!handlerStarted) {
        call.failAndAwait(
            new NotStored("the handler did not start (status " + status + ")"), maxWait);
      } else if (asyncWork.workAbandoned()) {
        call.failAndAwait(
            new NotStored("the handler's work timed out before it began (" + status + ")"),
            maxWait);
      } else if (streamTimedOutStatus >= 0 && isStored(streamTimedOutStatus)) {
        // whatever Spring answered at the timeout (503), the stream's work may still send
        call.completeAndAwait(StoredResponse.capture(response, null, headers), maxWait);
      } else if (!isStored(status) && valueNotWritten) {
        // Spring MVC failed to write the value of work that ran: it may have sent
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
}
