package dev.idempotency.spring.web;

import static dev.idempotency.spring.web.StoredStatuses.isStored;

import dev.idempotency.spring.PendingCall;
import dev.idempotency.spring.web.AsyncWork.WrittenBody;
import dev.idempotency.spring.web.StoredStatuses.NotStored;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.web.context.request.async.AsyncRequestTimeoutException;
import org.springframework.web.servlet.mvc.method.annotation.ResponseBodyEmitter;

/**
 * The end of the stream of one claimed {@link IdempotentEndpoint} request (a {@code
 * StreamingResponseBody}, an emitter) that outlived its request before it wrote: cut short by a
 * timeout or the server's stop, taken over by the starter, or returned by work that outlived its
 * request. The outcome waits for the stream's end and is decided by it: its own failure before it
 * wrote releases the key; a normal end, a write, or no end shortly before the guard's close grace
 * runs out records it as answered without its body (a stream taken over that ended normally with
 * what it wrote, if it fits). Part of its {@link AsyncWork}, whose state (the response the work's
 * result is rendered with, the work's stage) decides whether the call may still wait, and whose
 * report it shares: the first report wins.
 */
final class StreamEnd {

  private final AsyncWork work;
  private final PendingCall<StoredResponse> call;
  private final List<String> headers;
  private final AtomicBoolean reported;
  private volatile @Nullable BooleanSupplier streamWrote; // set once a stream awaits its end
  private volatile @Nullable WrittenBody streamBody; // a stream taken over: what it wrote
  private volatile @Nullable ResponseBodyEmitter emitter; // the handler's own, or a later stage's
  private volatile @Nullable EmitterEnd emitterEnd; // its observer, once Spring MVC started it
  private volatile @Nullable Consumer<Runnable> graceRunsOut; // bounds the wait for an emitter

  /**
   * @param work the call's async work, whose state decides whether the call may still wait
   * @param call the claimed call, which the stream's end completes or fails
   * @param headers the response headers to store besides the usual ones
   * @param reported the call's report: set once, by whichever reports first
   */
  StreamEnd(
      AsyncWork work,
      PendingCall<StoredResponse> call,
      List<String> headers,
      AtomicBoolean reported) {
    this.work = work;
    this.call = call;
    this.headers = headers;
    this.reported = reported;
  }

  /**
   * How the wait for the end of an emitter the work returned after its request ended ({@link
   * #followLaterEmitter}) is bounded.
   *
   * @param graceRunsOut runs its task shortly before the guard's close grace, counted from then,
   *     runs out
   */
  void boundEmitterEnds(Consumer<Runnable> graceRunsOut) {
    this.graceRunsOut = graceRunsOut;
  }

  /**
   * A stream that wrote nothing of its body yet was cut short (a timeout, or the server stopped
   * under it) while its work runs on Spring MVC's async executor (a {@code StreamingResponseBody}),
   * whose end this call hears of ({@link AsyncWork#lateResult}): the outcome waits for that end
   * instead of being decided now. A failure before the stream wrote anything is the stream's own
   * (nothing sent): the key is released, as for a failed request; a normal end, or a failure after
   * it wrote (its send happened, the response was gone), is recorded as answered without its body
   * ({@code late}'s status and headers), as is a stream that has not ended when the guard's close
   * grace runs out ({@link #streamOutlivesTheGrace}). From now on the request's own end reports
   * nothing. If the stream ended already, its end waiting for its dispatch ({@link
   * AsyncWork#earlyResult}), that end decides now: its own failure just before a timeout releases
   * the key too.
   *
   * @param late the response as the handler left it when the work went async
   * @param wroteBody whether the stream has written any of its body by now
   * @return false if the call was reported or detached already, its handler never started, or its
   *     work is not a {@code StreamingResponseBody}'s that began (the stream is an emitter: {@link
   *     #awaitEmitterEnd})
   */
  boolean awaitStreamEnd(LateResponse late, BooleanSupplier wroteBody) {
    if (emitter != null) {
      return false;
    }
    Object result = work.cutShort(late, wroteBody, true);
    if (result == AsyncWork.NOT_CUT) {
      return false;
    }
    if (result != AsyncWork.NO_RESULT && reported.compareAndSet(false, true)) {
      record(late, result, wroteBody.getAsBoolean());
    }
    return true;
  }

  /**
   * The handler method returned {@code emitter} (or an entity of it): its own stream; or the work's
   * result (a {@code Callable}'s, a later stage's) is one, which Spring MVC starts on the request's
   * next dispatch: observed and decided as the handler's own from then on.
   */
  void returnsAnEmitter(ResponseBodyEmitter emitter) {
    this.emitter = emitter;
  }

  /**
   * Spring MVC started the request's async processing: the handler's own emitter, if it returned
   * one, is observed from now on ({@link EmitterEnd}), so that a cut that comes later, whichever of
   * Spring MVC's callbacks runs first (a timeout's, or an error's at the server's stop), finds its
   * end heard. Its ends count only once it is cut short ({@link #awaitEmitterEnd}).
   */
  void asyncStarted() {
    ResponseBodyEmitter returned = emitter;
    if (returned != null && emitterEnd == null) {
      emitterEnd = EmitterEnd.observe(returned);
    }
  }

  /**
   * The emitter the handler method returned ({@link #returnsAnEmitter}), which sent nothing yet,
   * was cut short (a timeout, or the server stopped under it): as for a {@code
   * StreamingResponseBody} ({@link #awaitStreamEnd}), the outcome waits for the application's end
   * of it ({@link EmitterEnd}) instead of being decided now. Its own failure ({@code
   * completeWithError} with an error of its own) before anything was sent releases the key; a
   * normal end, a send (one that failed, or failed in the emitter after the cut, too), or no end by
   * {@link #streamOutlivesTheGrace} records it as answered without its body. From now on the
   * request's own end reports nothing.
   *
   * @param late the response as the handler left it when it returned the emitter
   * @param wroteBody whether the stream has written any of its body by now
   * @return false if the call was reported or detached already, its handler never started, it
   *     returned no emitter, or its emitter's end cannot be observed (it ended already, say)
   */
  boolean awaitEmitterEnd(LateResponse late, BooleanSupplier wroteBody) {
    ResponseBodyEmitter returned = emitter;
    if (returned == null || !work.mayBeCutShort()) {
      return false;
    }
    EmitterEnd observed = emitterEnd;
    // observing takes the emitter's lock: not under the work's
    EmitterEnd end = observed != null ? observed : EmitterEnd.observe(returned);
    if (end == null) {
      return false;
    }
    BooleanSupplier wrote = () -> wroteBody.getAsBoolean() || end.sent();
    if (work.cutShort(late, wrote, false) == AsyncWork.NOT_CUT) {
      return false;
    }
    recordAtItsEnd(end, late, wrote);
    return true;
  }

  /**
   * The result of work that outlived its request (taken over by the starter, or detached at a
   * timeout or a shutdown) is an emitter, {@code returned}, which Spring MVC never gets: the
   * starter follows it to its end ({@link EmitterEnd#follow}), decided as the handler's own emitter
   * cut short before it sent is ({@link #awaitEmitterEnd}): its own failure before any send
   * releases the key; a send, a normal end, or no end shortly before the guard's close grace,
   * counted from now, runs out ({@link #streamOutlivesTheGrace}) records it as answered without its
   * body. Asked by {@link AsyncWork#awaitLaterEmitterEnd}, only for a first stage's emitter.
   *
   * @param late the response the work's result is rendered with
   * @return false if the emitter cannot be followed (the caller then records it as answered)
   */
  boolean followLaterEmitter(LateResponse late, ResponseBodyEmitter returned) {
    // following it takes the emitter's lock: not under the work's
    EmitterEnd end = EmitterEnd.follow(returned);
    if (end == null) {
      return false;
    }
    BooleanSupplier wrote = end::sent;
    synchronized (work) {
      this.streamWrote = wrote;
    }
    recordAtItsEnd(end, late, wrote);
    Consumer<Runnable> bound = graceRunsOut;
    if (bound != null) {
      bound.accept(this::streamOutlivesTheGrace); // the application may never end it
    }
    return true;
  }

  /** Records the call when the emitter ends ({@link #record}), unless it was reported. */
  private void recordAtItsEnd(EmitterEnd end, LateResponse late, BooleanSupplier wrote) {
    end.whenEnded(
        failure -> {
          if (reported.compareAndSet(false, true)) {
            try {
              record(late, failure, wrote.getAsBoolean());
            } catch (RuntimeException e) {
              log().warn("The end of a cut-short idempotent emitter could not be recorded", e);
            }
          }
        });
  }

  /**
   * The outcome waits for the stream's end from now on; called under the work's lock, as the
   * response the result is rendered with is set.
   *
   * @param wrote whether the stream has written any of its body by then
   */
  void awaits(BooleanSupplier wrote) {
    this.streamWrote = wrote;
  }

  /**
   * The work the starter took over is a stream's, which writes {@code body}; called under the
   * work's lock ({@link AsyncWork#takeOverQueuedWork}).
   */
  void takenOver(WrittenBody body) {
    this.streamWrote = body::wrote;
    this.streamBody = body;
  }

  /**
   * Whether the stream has written any of its body, if the outcome waits for its end; else null.
   */
  @Nullable BooleanSupplier wrote() {
    return streamWrote;
  }

  /**
   * Whether the outcome waits for the end of a stream that was cut short ({@link #awaitStreamEnd},
   * {@link #awaitEmitterEnd}).
   */
  boolean awaitsStreamEnd() {
    return streamWrote != null;
  }

  /**
   * Whether the work the starter took over is a stream's ({@link AsyncWork#takeOverQueuedWork}).
   */
  boolean tookOverAStream() {
    return streamBody != null;
  }

  /**
   * The guard's close grace runs out and the stream whose outcome waits for its end ({@link
   * #awaitStreamEnd}, {@link #awaitEmitterEnd}) has not ended: it may still send, so it is recorded
   * now as answered without its body, before the guard gives up on its call (a retry gets {@code
   * 422 response-not-stored}, never a second send). For an emitter, whose end the application may
   * never call, the same holds after a timeout once the guard's close grace has passed since it.
   * Does nothing once it was reported.
   */
  void streamOutlivesTheGrace() {
    LateResponse response;
    synchronized (work) {
      response = work.late();
      if (response == null || streamWrote == null) {
        return;
      }
    }
    if (reported.compareAndSet(false, true)) {
      record(response, AsyncWork.NO_RESULT, true);
    }
  }

  /**
   * The stream's outcome, decided at its end ({@link #awaitStreamEnd}), reported already: its own
   * failure before it wrote releases the key; anything else is recorded as answered without its
   * body, but the normal end of a stream the starter took over, which it wrote into memory, with
   * what it wrote if that fits the bound ({@link AsyncWork#takeOverQueuedWork}).
   */
  void record(LateResponse response, @Nullable Object result, boolean wroteBody) {
    if (result instanceof Throwable failure
        && !wroteBody
        && !EndpointCall.isDisconnect(failure)
        && !(failure instanceof AsyncRequestTimeoutException)) {
      call.fail(
          new NotStored(
              "the handler's stream failed before it wrote anything: "
                  + failure.getClass().getName()));
    } else if (isStored(response.statusLeft())) {
      WrittenBody written = streamBody;
      byte[] body =
          written != null && result != AsyncWork.NO_RESULT && !(result instanceof Throwable)
              ? written.bytes()
              : null;
      // a stream taken over that ended normally is stored with what it wrote, if it fits
      call.complete(
          body != null ? response.leftWithBody(body, headers) : response.leftWithoutBody(headers));
    } else {
      call.fail(new NotStored("status " + response.statusLeft() + " is not stored"));
    }
  }

  /** Under EndpointCall's logger, as before this class was split out of AsyncWork. */
  private static Logger log() {
    return LoggerFactory.getLogger(EndpointCall.class);
  }
}
