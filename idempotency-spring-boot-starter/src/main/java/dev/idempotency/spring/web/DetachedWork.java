package dev.idempotency.spring.web;

import static dev.idempotency.spring.web.DecoratedRun.ENDED;
import static dev.idempotency.spring.web.DecoratedRun.GIVEN_UP;
import static dev.idempotency.spring.web.DecoratedRun.NOT_RUN;
import static dev.idempotency.spring.web.DecoratedRun.givenUp;
import static dev.idempotency.spring.web.DecoratedRun.runDecorated;

import dev.idempotency.spring.web.StarterRun.Stages;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.http.ResponseEntity;

/**
 * Runs an endpoint's work detached from its request, on a pool of at most {@link
 * UninterruptedWork#TAKEN_OVER_THREADS} daemon threads of the starter's own: work still queued in
 * Spring MVC's async executor at a timeout or a shutdown, which the starter takes over ({@link
 * AsyncWork#takeOverQueuedWork}); the later stages of work that began on Spring MVC's task and
 * whose request a timeout or a shutdown detached ({@link AsyncWork.Queued#continueDetached}); and a
 * handler's async outcome that Spring MVC will neither run nor follow ({@link #follower}). When
 * every thread is busy, or the pool was shut down, the work runs on the thread that takes it over
 * (the container's, at a timeout; the one stopping the context, at a shutdown), since neither
 * dropping it nor releasing its key is safe; a continuation runs on a thread of the shielded work's
 * pool instead ({@link NeverOnTheCaller}). Each run gets the thread context the request's thread
 * had ({@link StarterRun}). The pool's idle threads end after a minute. Split out of {@link
 * UninterruptedWork}, which shields the work Spring MVC runs itself, and logged under its logger.
 */
final class DetachedWork {

  private static final Logger log = LoggerFactory.getLogger(UninterruptedWork.class);

  private final ThreadPoolExecutor takenOver;
  private final ExecutorService workers;

  /**
   * @param takenOverThreads how many threads run work taken over at once at most
   * @param workers the shielded work's pool, where a continuation runs when every thread of this
   *     one is busy ({@link NeverOnTheCaller}), and a follower's unused wrapper ends
   */
  DetachedWork(int takenOverThreads, ExecutorService workers) {
    this.workers = workers;
    AtomicInteger takenOverCount = new AtomicInteger();
    takenOver =
        new ThreadPoolExecutor(
            0,
            takenOverThreads,
            60,
            TimeUnit.SECONDS,
            new SynchronousQueue<>(),
            task -> {
              Thread thread =
                  new Thread(
                      task, "idempotent-endpoint-taken-over-" + takenOverCount.incrementAndGet());
              thread.setDaemon(true);
              return thread;
            },
            // every thread busy, or shut down (the context closes): the caller runs it, since
            // neither dropping it (a lost send) nor releasing its key (a second send) is safe;
            // a continuation runs on a thread of the shielded work's pool instead, if it can
            (task, executor) -> {
              if (task instanceof NeverOnTheCaller && overflows(task)) {
                return;
              }
              task.run();
            });
  }

  /**
   * {@code work} as the starter runs it detached from its request, on a thread of its own, with the
   * thread context {@code starterRun} took ({@link StarterRun}), unless its key's lease lapsed
   * meanwhile (a {@code KeyStoreException}, as for work that waited in Spring MVC's queue). {@link
   * AsyncWork.Queued#runDetached} runs it to its end as Spring MVC would run it ({@link
   * LaterStages#runToItsEnd}: a {@code Callable}, a {@code WebAsyncTask}'s callable, a {@code
   * CompletionStage} or a {@code DeferredResult} awaited, a {@code StreamingResponseBody} written
   * to nowhere); {@link AsyncWork.Queued#continueDetached} continues it from the result given; each
   * on the starter's threads ({@link #onATakenOverThread}), its end going to {@link
   * AsyncWork#takenOverResult}. If the application's task decorator refuses to wrap the work, or
   * its wrapper ends without running it (it throws before it), nothing of it was sent: the work
   * never runs after that, and the call ends ({@link DecoratedRun#givenUp}): released, unless a
   * stage that may have sent ran before it (then recorded as answered). A later {@code
   * DeferredResult} with no timeout of its own is awaited for the request's async timeout, read
   * when the work is run or, for work queued here, when its request is detached (the request async
   * then, each time), else {@link UninterruptedWork#DEFAULT_ASYNC_TIMEOUT_MILLIS}.
   *
   * @param body for a stream's work, what it writes; else null
   * @param queuedHere whether {@code work} is the work the request's handler returned, queued on
   *     this thread (the request's) for Spring MVC's task, which the starter takes over if it is
   *     still queued at a timeout or a shutdown ({@link AsyncWork#takeOverQueuedWork}): its run is
   *     decorated now, here, where Spring MVC's executor would have decorated its task (the thread
   *     that takes it over, a container's, has none of the request's context), and if the work
   *     starts on Spring MVC's task instead, the decorated run is run then with nothing to do
   *     ({@link AsyncWork.Queued#notTakenOver}), so every task the application's decorator wraps
   *     runs once (a decorator that takes something when it decorates gives it back when its task
   *     runs); the request's async timeout is read too when a timeout or a shutdown detaches the
   *     request ({@link AsyncWork.Queued#requestDetached}). Else {@code work} is an outcome the
   *     starter follows ({@link #follower}): decorated when it is run.
   * @param followedAfterASend for an outcome the starter follows, whether what produced it may have
   *     sent: a {@code Callable} of the work's ran and returned it, or it holds its value already
   *     ({@link #holdsItsValue}); so if its run never runs ({@link #decorateAndRun}), the call is
   *     recorded as answered, never released
   */
  AsyncWork.Queued detached(
      Callable<?> work,
      StarterRun starterRun,
      AsyncWork.@Nullable WrittenBody body,
      boolean queuedHere,
      boolean followedAfterASend) {
    EndpointCall call = starterRun.call();
    // a later DeferredResult's wait ends at its timeout, else the request's async timeout (read
    // when the work is run, or its request detached, the request async by then), or when the
    // close grace runs out
    long[] asyncTimeout = {UninterruptedWork.DEFAULT_ASYNC_TIMEOUT_MILLIS};
    CompletableFuture<Void> graceRunsOut = new CompletableFuture<>();
    Stages stages =
        laterStageRan ->
            LaterStages.runToItsEnd(work, laterStageRan, asyncTimeout[0], graceRunsOut);
    AtomicInteger run = new AtomicInteger(NOT_RUN);
    @Nullable Runnable decoratedHere =
        queuedHere ? starterRun.decorated(run, true, false, stages) : null;
    return new AsyncWork.Queued() {
      @Override
      public void runDetached() {
        asyncTimeout[0] = starterRun.asyncTimeout();
        if (decoratedHere != null) {
          // queued work that never began: if it never runs, nothing of it was sent
          onATakenOverThread(decoratedHere, run, call, false, false);
        } else {
          // a followed outcome, decorated here, on the thread of the dispatch that replaced it
          decorateAndRun(starterRun, run, true, false, followedAfterASend, stages, false);
        }
      }

      @Override
      public void requestDetached() {
        if (queuedHere) {
          asyncTimeout[0] = starterRun.asyncTimeout();
        }
      }

      @Override
      public void continueDetached(@Nullable Object result, boolean laterStageRan) {
        // decorated here, on the thread that hands it over (Spring MVC's task thread, for work
        // that began there), which its own decoration set up; if it never runs, a stage that
        // ran may have sent: a later one, the work's Callable (it ran, and returned the result),
        // or the one whose result holds its value already (nothing of it is left to run)
        boolean mayHaveSent =
            laterStageRan || queuedHere || followedAfterASend || holdsItsValue(result);
        decorateAndRun(
            starterRun,
            new AtomicInteger(NOT_RUN),
            false,
            laterStageRan,
            mayHaveSent,
            // the late value of a handler's own stage, which nothing of the work's ran before:
            // its first stage is decided as on time (a failure nothing maps releases the key)
            ran ->
                LaterStages.continueToItsEnd(
                    result, ran, asyncTimeout[0], graceRunsOut, !mayHaveSent),
            true);
      }

      @Override
      public void graceRunsOut() {
        graceRunsOut.complete(null);
      }

      @Override
      public void notTakenOver() {
        if (decoratedHere != null
            && starterRun.context().decorates()
            && run.compareAndSet(NOT_RUN, ENDED)) {
          decoratedHere.run(); // only the decorator's own wrapping runs
        }
      }

      @Override
      public AsyncWork.@Nullable WrittenBody body() {
        return body;
      }
    };
  }

  /**
   * {@code stages}, decorated here by the application's task decorator ({@link
   * StarterRun#decorated}), run on a thread of the taken-over pool ({@link #onATakenOverThread}):
   * the one path of the starter's detached runs that the application's decorator wraps on the
   * thread that asks for them (a followed outcome's run, {@link AsyncWork.Queued#runDetached}; a
   * continuation, {@link AsyncWork.Queued#continueDetached}). A decorator that refuses to wrap it
   * (throws here: a bulkhead out of permits) ends the call as that refusal, as one whose wrapper
   * ends without running it does ({@link DecoratedRun#givenUp}); thrown from here, the refusal
   * would end in whatever asked for the run (a stage's callback swallows it, Spring MVC's dispatch
   * of a replaced outcome fails after the call was marked taken over), nothing would report the
   * call, and its lease would be renewed until the process stops, every retry a {@code 409}. A
   * {@code VirtualMachineError} is thrown on.
   *
   * @param laterStageRan whether a later stage of the work ran before these stages
   * @param mayHaveSent whether a stage that may have sent ran before these, for the call's end if
   *     they never run ({@link DecoratedRun#givenUp})
   */
  private void decorateAndRun(
      StarterRun starterRun,
      AtomicInteger run,
      boolean beginsTheWork,
      boolean laterStageRan,
      boolean mayHaveSent,
      Stages stages,
      boolean continuation) {
    Runnable decorated;
    try {
      decorated = starterRun.decorated(run, beginsTheWork, laterStageRan, stages);
    } catch (VirtualMachineError fatal) {
      throw fatal;
    } catch (RuntimeException | Error refused) {
      if (run.compareAndSet(NOT_RUN, GIVEN_UP)) {
        givenUp(starterRun.call(), refused, mayHaveSent);
      }
      return;
    }
    onATakenOverThread(decorated, run, starterRun.call(), mayHaveSent, continuation);
  }

  /**
   * Runs {@code decorated} (a {@link StarterRun}'s) on a thread of the taken-over pool, or, when
   * they are all busy, on this one. If the application's decorator's wrapper ends without running
   * it, it never runs after that, and the call ends ({@link DecoratedRun#givenUp}).
   *
   * @param mayHaveSent whether a stage that may have sent ran before it, for that end
   */
  private void onATakenOverThread(
      Runnable decorated,
      AtomicInteger run,
      EndpointCall call,
      boolean mayHaveSent,
      boolean continuation) {
    Runnable task =
        () -> {
          @Nullable Throwable failure = runDecorated(decorated);
          if (run.compareAndSet(NOT_RUN, GIVEN_UP)) {
            // the decorator's wrapper ended without running the work: else nothing ends the
            // call, the key claimed
            givenUp(call, failure, mayHaveSent);
          } else if (failure != null) {
            log.debug("The application's task decorator failed after the work ran", failure);
          }
        };
    takenOver.execute(continuation ? (NeverOnTheCaller) task::run : task);
  }

  /**
   * Runs {@code task} on a thread of the shielded work's pool ({@link NeverOnTheCaller}).
   *
   * @return false if that pool refused it (shut down: the context closes)
   */
  private boolean overflows(Runnable task) {
    try {
      workers.execute(task);
      return true;
    } catch (RejectedExecutionException shutDown) {
      return false;
    }
  }

  /**
   * A continuation of detached work ({@link AsyncWork.Queued#continueDetached}), which is handed
   * over on the thread that completed the work's result: an application's thread (a provider
   * client's callback, an event loop), Spring MVC's task thread, another request's. When every
   * thread of the taken-over pool is busy it runs on a thread of the shielded work's pool instead,
   * never on that thread: awaiting there a later {@code DeferredResult} or stage that only that
   * thread would settle would block it until the wait expires, and the result that came then (a
   * refusal before any send) would be lost to a call recorded as answered without its body.
   */
  private interface NeverOnTheCaller extends Runnable {}

  /**
   * What follows {@code call}'s async outcomes that Spring MVC will neither run nor follow ({@link
   * AsyncWork#followsWith}), made on the request's thread as its handler returns: each run gets the
   * thread context Spring MVC would give its own task thread, taken here, whatever thread later
   * completes the handler's stage (an application's thread, or another request's, whose own MDC and
   * request attributes are never bound): the MDC and locale the request's thread has now, request
   * attributes of the run's own over this request ({@link #attributesOfTheTakenOverRun}), and
   * {@code context} (the request's callable interceptors, the application's task decorator), which
   * for a handler's own {@code CompletionStage} or {@code DeferredResult} ({@code ownStage}) is
   * made ready here ({@link TaskThreadContext#decoratingHere}), since no other thread of the
   * request's will run. A run is decided as a taken-over run's ({@link AsyncWork#takenOverResult}).
   *
   * @param ownStage whether the handler returned its own stage (no {@code Callable})
   */
  AsyncWork.Follower follower(EndpointCall call, TaskThreadContext context, boolean ownStage) {
    TaskThreadContext own = ownStage ? context.decoratingHere() : context;
    StarterRun starterRun = StarterRun.ofThisThread(call, own);
    return new AsyncWork.Follower() {
      @Override
      public AsyncWork.Queued follow(@Nullable Object outcome) {
        // a Callable of the work's ran and returned it, or it holds its value already
        return detached(
            () -> outcome, starterRun, null, false, !ownStage || holdsItsValue(outcome));
      }

      @Override
      public void unused() {
        if (ownStage && own.decorates()) { // else nothing was wrapped on the request's thread
          // on a thread of the starter's: a wrapper that clears what it set clears it there,
          // never on the thread that reports the result (the request's, say)
          try {
            workers.execute(own::unused);
          } catch (RejectedExecutionException shutDown) {
            own.unused();
          }
        }
      }
    };
  }

  /**
   * Whether {@code result} (or the body of a {@code ResponseEntity} of it) is a {@code
   * DeferredResult} or a {@code CompletionStage} that holds its final value already ({@link
   * SettledResults}: no failure, and no more async work in it): the stage that returned it has
   * nothing left to run, so whatever would send ran.
   */
  private static boolean holdsItsValue(@Nullable Object result) {
    Object value = result instanceof ResponseEntity<?> entity ? entity.getBody() : result;
    return SettledResults.settled(value)
        && !AsyncResultShapes.moreAsyncWork(SettledResults.ownValue(value));
  }

  /**
   * Stops the pool's threads; work still running goes on, and work taken over from now on runs on
   * the thread that takes it over.
   */
  void shutdown() {
    takenOver.shutdown();
  }
}
