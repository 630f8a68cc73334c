package dev.idempotency.spring.web;

import java.util.Map;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.MDC;

/**
 * What every run of an endpoint's work that the application's task decorator wraps shares, whether
 * it runs on a worker of {@link UninterruptedWork} (shielded from Spring MVC's interrupt) or on the
 * starter's own thread detached from its request ({@link DetachedWork}, {@link StarterRun}): the
 * states of its run, how the decorated task is run, and how its call ends if the decorator refused
 * the work or its wrapper ended without running it ({@link #givenUp}): nothing of that run was
 * sent, so the call ends, never left claimed by work that will never run. Logged under {@code
 * UninterruptedWork}'s logger, as before it was split out of that class.
 */
final class DecoratedRun {

  /**
   * The run of a task the application's decorator wraps (the worker's, the taken-over one): not run
   * yet; running the work; given up, its decorator's wrapper having ended without running it (the
   * call ended as a failure: the work must never run after that); ended without running, the work
   * having run on Spring MVC's task (never taken over).
   */
  static final int NOT_RUN = 0;

  static final int RUNNING = 1;
  static final int GIVEN_UP = 2;
  static final int ENDED = 3;

  private static final Logger log = LoggerFactory.getLogger(UninterruptedWork.class);

  private DecoratedRun() {}

  /** Runs a task the application's decorator wrapped; its failure, if it throws, else null. */
  static @Nullable Throwable runDecorated(Runnable decorated) {
    try {
      decorated.run();
      return null;
    } catch (Throwable e) {
      return e;
    }
  }

  /**
   * The failure a call ends with when the application's task decorator's wrapper ended without
   * running the work, or the decorator refused to wrap it ({@code failure}, what it threw, or null
   * if it returned): nothing of that run was sent, so the call ends as a failure of the work before
   * it sent would (through the application's exception resolvers: one nothing maps releases the
   * key), or, after a stage that may have sent ({@code mayHaveSent}), is recorded as answered
   * without its body; never held claimed by work that will never run.
   */
  static Throwable notRun(@Nullable Throwable failure, boolean mayHaveSent) {
    log.warn(
        "The application's task decorator refused, or ended without running, an idempotent"
            + " endpoint's work on the starter's thread; it never runs: {} ({})",
        mayHaveSent
            ? "a stage that ran before it may have sent, the call is recorded as answered"
                + " without its body"
            : "nothing was sent, the call ends as a failure",
        failure == null ? "it returned without running it" : failure.getClass().getName());
    return failure != null
        ? failure
        : new IllegalStateException(
            "the application's task decorator returned without running the work; nothing was"
                + " sent");
  }

  /**
   * The end of a call whose detached run the application's task decorator refused, or whose wrapper
   * ended without running it ({@code failure}: what it threw, or null if it returned): the run
   * never runs, so nothing of it was sent. If a stage that may have sent ran before it ({@code
   * mayHaveSent}), the call is recorded as answered without its body (the retry gets {@code 422}
   * {@code response-not-stored}, never a second send); else it ends as a failure of the work before
   * it sent would, through the application's exception resolvers (one nothing maps releases the
   * key, and the retry runs the handler again). Never left in flight ({@link
   * AsyncWork#takenOverResult}).
   */
  static void givenUp(EndpointCall call, @Nullable Throwable failure, boolean mayHaveSent) {
    call.asyncWork().takenOverResult(notRun(failure, mayHaveSent), mayHaveSent);
  }

  /** Sets this thread's MDC to {@code mdc}, or clears it if null. */
  static void setMdc(@Nullable Map<String, String> mdc) {
    if (mdc == null) {
      MDC.clear();
    } else {
      MDC.setContextMap(mdc);
    }
  }
}
