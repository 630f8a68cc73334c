package dev.idempotency.spring.web;

import dev.idempotency.KeyStoreException;
import jakarta.servlet.http.HttpServletRequest;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.MDC;
import org.springframework.context.i18n.LocaleContext;
import org.springframework.context.i18n.LocaleContextHolder;
import org.springframework.http.ResponseEntity;
import org.springframework.web.context.request.RequestAttributes;
import org.springframework.web.context.request.RequestContextHolder;
import org.springframework.web.context.request.ServletRequestAttributes;
import org.springframework.web.servlet.mvc.method.annotation.StreamingResponseBody;

/**
 * Runs an endpoint's {@code Callable} on a thread of its own, while Spring MVC's task thread waits
 * for it without heeding interrupts. At a container async timeout Spring MVC cancels its task with
 * an interrupt ({@code future.cancel(true)}) before any timeout handler runs; a provider call that
 * is interruptible ({@code HttpClient.send}) would then fail after the provider got the request,
 * and the key would be released or never reported. Shielded so, the send goes on and its outcome is
 * recorded (SPEC 13, 16). Work whose task is still queued in Spring MVC's async executor at a
 * timeout (Spring MVC cancels the task) or a shutdown is taken over ({@link
 * AsyncWork#takeOverQueuedWork}): it runs here instead, detached from its request, on a pool of at
 * most {@link #TAKEN_OVER_THREADS} daemon threads, or, when they are all busy or the pool was shut
 * down, on the thread that takes it over (the container's, at a timeout; the one stopping the
 * context, at a shutdown): neither dropping it nor releasing its key is safe. Work whose key's
 * lease lapsed while it waited does not run (answered 503, or released once taken over; SPEC 16:
 * never send on a lapsed lease). Work that began on Spring MVC's task and whose request a timeout
 * or a shutdown detached, and whose result then is more async work (a {@code DeferredResult} an
 * application thread sets later, a {@code CompletionStage}, a later {@code Callable}), which Spring
 * MVC never runs once its request ended, has that result run to its end, or awaited ({@link
 * LaterStages}), on the same pool, as the later stages of work taken over are ({@link
 * AsyncWork.Queued#continueDetached}). The work sees the waiting thread's MDC, locale and request
 * attributes, and what Spring MVC gives its own task thread: the request's callable interceptors
 * run around it and the application's task decorator wraps it ({@link TaskThreadContext}); a
 * decorator that refuses to wrap the work, or whose wrapper ends without running it, ends the call
 * on every path: the work never runs after that, and nothing of it was sent ({@link #givenUp}).
 * Taken over, the work gets request attributes of its own over its request (or that request's copy,
 * once it ended), active while it runs, as Spring MVC's task thread gets them from {@code
 * FrameworkServlet}. The pool grows with the waiting threads (one worker per waiting task, so it is
 * bounded by Spring MVC's own async executor) and its idle threads end after a minute.
 */
final class UninterruptedWork {

  /** How many threads run work taken over at once at most; more runs on the caller's thread. */
  static final int TAKEN_OVER_THREADS = 32;

  /**
   * How long a later {@code DeferredResult} with no timeout of its own is awaited when the
   * request's async timeout cannot be read: the servlet containers' default async timeout.
   */
  static final long DEFAULT_ASYNC_TIMEOUT_MILLIS = 30_000;

  private static final Logger log = LoggerFactory.getLogger(UninterruptedWork.class);

  /**
   * The run of a task the application's decorator wraps (the worker's, the taken-over one): not run
   * yet; running the work; given up, its decorator's wrapper having ended without running it (the
   * call ended as a failure: the work must never run after that); ended without running, the work
   * having run on Spring MVC's task (never taken over).
   */
  private static final int NOT_RUN = 0;

  private static final int RUNNING = 1;
  private static final int GIVEN_UP = 2;
  private static final int ENDED = 3;

  private final ExecutorService workers;
  private final ThreadPoolExecutor takenOver;

  UninterruptedWork() {
    this(TAKEN_OVER_THREADS);
  }

  /**
   * @param takenOverThreads how many threads run work taken over at once at most
   */
  UninterruptedWork(int takenOverThreads) {
    AtomicInteger count = new AtomicInteger();
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
    workers =
        new ThreadPoolExecutor(
            0,
            Integer.MAX_VALUE,
            60,
            TimeUnit.SECONDS,
            new SynchronousQueue<>(),
            task -> {
              Thread thread = new Thread(task, "idempotent-endpoint-" + count.incrementAndGet());
              thread.setDaemon(true);
              return thread;
            });
  }

  /**
   * A {@code StreamingResponseBody}, which Spring MVC runs on its async executor as it runs a
   * {@code Callable} (and interrupts at a timeout), shielded as {@link #shield(Callable,
   * EndpointCall)} shields one: its writing runs on a worker thread, awaited uninterruptibly.
   */
  StreamingResponseBody shield(StreamingResponseBody body, EndpointCall call) {
    return shield(body, call, TaskThreadContext.NONE);
  }

  /**
   * {@link #shield(StreamingResponseBody, EndpointCall)}, its writing given {@code context} on the
   * thread that runs it.
   */
  StreamingResponseBody shield(
      StreamingResponseBody body, EndpointCall call, TaskThreadContext context) {
    if (body instanceof ShieldedBody) {
      return body;
    }
    call.returnsAStream(); // a later stage's stream too: its timeout is a stream's
    AtomicReference<OutputStream> target = new AtomicReference<>();
    Callable<Void> write =
        () -> {
          body.writeTo(target.get());
          return null;
        };
    BufferedBody buffered = new BufferedBody(call.bodyLimit());
    Callable<Void> writing =
        shield(
            write,
            call,
            detached(
                () -> {
                  target.set(buffered); // its request is gone: kept to store, if it fits
                  return write.call();
                },
                StarterRun.ofThisThread(call, context),
                buffered,
                true,
                false),
            context);
    return (ShieldedBody)
        out -> {
          target.set(out);
          try {
            writing.call();
          } catch (IOException | RuntimeException e) {
            throw e;
          } catch (Exception e) {
            throw new IOException(e);
          }
        };
  }

  /**
   * {@code work}, run on a worker thread and awaited uninterruptibly by the caller of the copy; not
   * run at all if a timeout abandoned it before its task began ({@link AsyncWork#detach}). Work
   * that is already a shielded copy is returned as it is.
   */
  <V> Callable<V> shield(Callable<V> work, EndpointCall call) {
    if (work instanceof ShieldedCallable<V> shielded) {
      return shielded;
    }
    return shield(work, call, TaskThreadContext.NONE);
  }

  /**
   * {@link #shield(Callable, EndpointCall)}, the work given {@code context} on the thread that runs
   * it (the request's callable interceptors and the application's task decorator, as Spring MVC
   * gives them its own task thread: {@link TaskThreadContext}).
   */
  <V> Callable<V> shield(Callable<V> work, EndpointCall call, TaskThreadContext context) {
    if (work instanceof ShieldedCallable<V> shielded) {
      return shielded;
    }
    return shield(
        work,
        call,
        detached(work, StarterRun.ofThisThread(call, context), null, true, false),
        context);
  }

  private <V> Callable<V> shield(
      Callable<V> work, EndpointCall call, AsyncWork.Queued queued, TaskThreadContext context) {
    call.asyncWork().workQueued(queued);
    ShieldedCallable<V> shielded =
        () -> {
          if (!call.asyncWork().workStarts()) {
            // Spring MVC cancelled the task at a timeout as it began: nothing was sent
            throw new CancellationException("the request timed out before its work began");
          }
          if (!call.leaseHeld()) {
            // it waited in the queue while its lease lapsed (or could not be renewed): another
            // request
            // may hold the key now; answered 503, nothing sent, the key released if still ours
            throw new KeyStoreException(
                "the key's lease lapsed while the request's work waited to begin; nothing was sent",
                null);
          }
          Map<String, String> mdc = MDC.getCopyOfContextMap();
          LocaleContext locale = LocaleContextHolder.getLocaleContext();
          RequestAttributes attributes = RequestContextHolder.getRequestAttributes();
          CompletableFuture<V> result = new CompletableFuture<>();
          AtomicInteger run = new AtomicInteger(NOT_RUN);
          // decorated here, on Spring MVC's task thread, which its own decoration set up
          Runnable decorated =
              context.decorate(
                  () -> {
                    if (!run.compareAndSet(NOT_RUN, RUNNING)) {
                      return; // the decorator's wrapper ended without it: the call ended so
                    }
                    Map<String, String> previousMdc = MDC.getCopyOfContextMap();
                    setMdc(mdc);
                    LocaleContextHolder.setLocaleContext(locale);
                    RequestContextHolder.setRequestAttributes(attributes);
                    try {
                      @SuppressWarnings("unchecked")
                      V value = (V) context.call(work);
                      result.complete(value);
                    } catch (Throwable failure) {
                      result.completeExceptionally(failure);
                    } finally {
                      RequestContextHolder.resetRequestAttributes();
                      LocaleContextHolder.resetLocaleContext();
                      setMdc(previousMdc);
                      // it ran here, never taken over: the task decorated to take it over is
                      // ended, after the work (a decorator that clears its context on the thread
                      // it ran on clears it then, not before the work or Spring MVC's postProcess)
                      queued.notTakenOver();
                    }
                  });
          workers.execute(
              () -> {
                @Nullable Throwable failure = runDecorated(decorated);
                if (run.compareAndSet(NOT_RUN, GIVEN_UP)) {
                  // the decorator's wrapper ended without running the work: nothing was sent,
                  // so the call ends as that failure (else nothing ends it, and Spring MVC's
                  // task thread waits for good, the key claimed)
                  result.completeExceptionally(notRun(failure, false));
                  try {
                    queued.notTakenOver();
                  } catch (RuntimeException e) {
                    log.debug("The task decorated to take the work over failed as it ended", e);
                  }
                } else if (failure != null) {
                  log.debug("The application's task decorator failed after the work ran", failure);
                }
              });
          return await(result);
        };
    context.task(shielded); // the task Spring MVC hands its interceptors
    return shielded;
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
   * never runs after that, and the call ends ({@link #givenUp}): released, unless a stage that may
   * have sent ran before it (then recorded as answered). A later {@code DeferredResult} with no
   * timeout of its own is awaited for the request's async timeout, read when the work is run or,
   * for work queued here, when its request is detached (the request async then, each time), else
   * {@link #DEFAULT_ASYNC_TIMEOUT_MILLIS}.
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
  private AsyncWork.Queued detached(
      Callable<?> work,
      StarterRun starterRun,
      AsyncWork.@Nullable WrittenBody body,
      boolean queuedHere,
      boolean followedAfterASend) {
    EndpointCall call = starterRun.call();
    // a later DeferredResult's wait ends at its timeout, else the request's async timeout (read
    // when the work is run, or its request detached, the request async by then), or when the
    // close grace runs out
    long[] asyncTimeout = {DEFAULT_ASYNC_TIMEOUT_MILLIS};
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
        asyncTimeout[0] = asyncTimeoutOf(starterRun.attributes());
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
          asyncTimeout[0] = asyncTimeoutOf(starterRun.attributes());
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
   * ends without running it does ({@link #givenUp}); thrown from here, the refusal would end in
   * whatever asked for the run (a stage's callback swallows it, Spring MVC's dispatch of a replaced
   * outcome fails after the call was marked taken over), nothing would report the call, and its
   * lease would be renewed until the process stops, every retry a {@code 409}. A {@code
   * VirtualMachineError} is thrown on.
   *
   * @param laterStageRan whether a later stage of the work ran before these stages
   * @param mayHaveSent whether a stage that may have sent ran before these, for the call's end if
   *     they never run ({@link #givenUp})
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
   * it, it never runs after that, and the call ends ({@link #givenUp}).
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
   * The end of a call whose detached run the application's task decorator refused, or whose wrapper
   * ended without running it ({@code failure}: what it threw, or null if it returned): the run
   * never runs, so nothing of it was sent. If a stage that may have sent ran before it ({@code
   * mayHaveSent}), the call is recorded as answered without its body (the retry gets {@code 422}
   * {@code response-not-stored}, never a second send); else it ends as a failure of the work before
   * it sent would, through the application's exception resolvers (one nothing maps releases the
   * key, and the retry runs the handler again). Never left in flight ({@link
   * AsyncWork#takenOverResult}).
   */
  private static void givenUp(EndpointCall call, @Nullable Throwable failure, boolean mayHaveSent) {
    call.asyncWork().takenOverResult(notRun(failure, mayHaveSent), mayHaveSent);
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

  /** Stages of work the starter runs detached from its request ({@link StarterRun}). */
  private interface Stages {
    /**
     * Runs them to their end: their result.
     *
     * @param laterStageRan set once a later stage runs ({@link LaterStages#runToItsEnd})
     */
    @Nullable Object run(boolean[] laterStageRan) throws Exception;
  }

  /**
   * What a run of work detached from its request gets on the starter's thread, as Spring MVC's task
   * thread gets it: the MDC and locale the request's thread had when the work was queued, request
   * attributes of its own over that thread's request ({@link #attributesOfTheTakenOverRun}), the
   * request's callable interceptors around the work, and the application's task decorator around
   * the whole; its end goes to {@link AsyncWork#takenOverResult}. For work the starter took over
   * ({@link AsyncWork.Queued#runDetached}) and for the later stages of work that began on Spring
   * MVC's task and that a timeout or a shutdown detached ({@link
   * AsyncWork.Queued#continueDetached}).
   */
  private record StarterRun(
      EndpointCall call,
      @Nullable Map<String, String> mdc,
      @Nullable LocaleContext locale,
      @Nullable RequestAttributes attributes,
      TaskThreadContext context) {

    /**
     * The run of {@code call}'s work with the thread context this thread has now (the request's):
     * its MDC, locale and request attributes, and {@code context}.
     */
    static StarterRun ofThisThread(EndpointCall call, TaskThreadContext context) {
      return new StarterRun(
          call,
          MDC.getCopyOfContextMap(),
          LocaleContextHolder.getLocaleContext(),
          RequestContextHolder.getRequestAttributes(),
          context);
    }

    /**
     * {@code stages}, run once, decorated by the application's task decorator on this thread.
     *
     * @param run the run's state: it runs only from {@link #NOT_RUN}
     * @param beginsTheWork whether these are the work's first stage, which waited to begin: it does
     *     not run if its key's lease lapsed meanwhile (a {@code KeyStoreException})
     * @param laterStageRan whether a stage of the work ran before these
     */
    Runnable decorated(
        AtomicInteger run, boolean beginsTheWork, boolean laterStageRan, Stages stages) {
      return context.decorate(
          () -> {
            if (!run.compareAndSet(NOT_RUN, RUNNING)) {
              return; // not taken over (the work ran on Spring MVC's task), or given up
            }
            Map<String, String> previousMdc = MDC.getCopyOfContextMap();
            LocaleContext previousLocale = LocaleContextHolder.getLocaleContext();
            RequestAttributes previousAttributes = RequestContextHolder.getRequestAttributes();
            RequestAttributes own = attributesOfTheTakenOverRun(attributes);
            setMdc(mdc);
            LocaleContextHolder.setLocaleContext(locale);
            RequestContextHolder.setRequestAttributes(own);
            @Nullable Object result;
            boolean[] ran = {laterStageRan};
            try {
              if (beginsTheWork && !call.leaseHeld()) {
                // it waited while its lease lapsed (or could not be renewed): nothing was sent
                throw new KeyStoreException(
                    "the key's lease lapsed while the request's work waited to begin; nothing was"
                        + " sent",
                    null);
              }
              // the request's interceptors around the work and its later stages
              result = context.call(() -> stages.run(ran));
            } catch (Throwable failure) {
              result = failure;
            } finally {
              RequestContextHolder.setRequestAttributes(previousAttributes);
              LocaleContextHolder.setLocaleContext(previousLocale);
              setMdc(previousMdc);
              ownAttributesCompleted(own, attributes);
            }
            call.asyncWork().takenOverResult(result, ran[0]);
          });
    }
  }

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

  /** Runs a task the application's decorator wrapped; its failure, if it throws, else null. */
  private static @Nullable Throwable runDecorated(Runnable decorated) {
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
  private static Throwable notRun(@Nullable Throwable failure, boolean mayHaveSent) {
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
   * Whether {@code result} (or the body of a {@code ResponseEntity} of it) is a {@code
   * DeferredResult} or a {@code CompletionStage} that holds its final value already ({@link
   * SettledResults}: no failure, and no more async work in it): the stage that returned it has
   * nothing left to run, so whatever would send ran.
   */
  private static boolean holdsItsValue(@Nullable Object result) {
    Object value = result instanceof ResponseEntity<?> entity ? entity.getBody() : result;
    return SettledResults.settled(value)
        && !AsyncWork.moreAsyncWork(SettledResults.ownValue(value));
  }

  /**
   * The request attributes the taken-over run binds: request attributes of its own over the
   * starter's request that {@code captured} holds (a copy of it once the request ended: {@link
   * BodyCachingRequest#outlivedByItsWork}), as {@code FrameworkServlet}'s binding interceptor gives
   * Spring MVC's own task thread fresh ones over its request. The ones captured on the request's
   * thread were completed when that dispatch ended (every request-scope read through them then
   * throws, after the work may have sent). Over the same request, they read the same request
   * attributes: a {@code @RequestScope} bean the handler created is the same instance.
   */
  private static @Nullable RequestAttributes attributesOfTheTakenOverRun(
      @Nullable RequestAttributes captured) {
    if (captured instanceof ServletRequestAttributes servlet) {
      return new ServletRequestAttributes(servlet.getRequest(), servlet.getResponse());
    }
    return captured;
  }

  /**
   * The taken-over run ended: its own request attributes ({@link #attributesOfTheTakenOverRun}) are
   * completed, which runs the destruction callbacks of the request-scoped beans created during the
   * run. A failing callback is logged at DEBUG: the work's outcome is kept.
   */
  private static void ownAttributesCompleted(
      @Nullable RequestAttributes own, @Nullable RequestAttributes captured) {
    if (own != captured && own instanceof ServletRequestAttributes servlet) {
      try {
        servlet.requestCompleted();
      } catch (RuntimeException e) {
        log.debug("A taken-over run's request-scope destruction callback failed", e);
      }
    }
  }

  /**
   * The async timeout of the request whose work is taken over (at its timeout or a shutdown, the
   * request is async by then), in milliseconds; else {@link #DEFAULT_ASYNC_TIMEOUT_MILLIS}.
   */
  private static long asyncTimeoutOf(@Nullable RequestAttributes attributes) {
    try {
      if (attributes instanceof ServletRequestAttributes servlet) {
        HttpServletRequest request = servlet.getRequest();
        if (request.isAsyncStarted()) {
          return request.getAsyncContext().getTimeout();
        }
      }
    } catch (RuntimeException e) {
      log.debug("A taken-over request's async timeout could not be read", e);
    }
    return DEFAULT_ASYNC_TIMEOUT_MILLIS;
  }

  /**
   * Where a stream taken over writes, its request gone: kept in memory up to the bound of a stored
   * body, then dropped (it is stored without its body, as a stream past the bound is on time).
   */
  private static final class BufferedBody extends OutputStream implements AsyncWork.WrittenBody {
    private final long limit;
    private @Nullable ByteArrayOutputStream kept = new ByteArrayOutputStream(); // guarded by this
    private volatile boolean wrote;

    BufferedBody(long limit) {
      this.limit = limit;
    }

    @Override
    public void write(int b) {
      write(new byte[] {(byte) b}, 0, 1);
    }

    @Override
    public synchronized void write(byte[] b, int off, int len) {
      if (len <= 0) {
        return;
      }
      wrote = true;
      ByteArrayOutputStream buffer = kept;
      if (buffer != null && buffer.size() + (long) len <= limit) {
        buffer.write(b, off, len);
      } else {
        kept = null; // past the bound: not stored
      }
    }

    @Override
    public boolean wrote() {
      return wrote;
    }

    @Override
    public synchronized byte @Nullable [] bytes() {
      ByteArrayOutputStream buffer = kept;
      return buffer == null ? null : buffer.toByteArray();
    }
  }

  /** A shielded copy of a {@code Callable}: shielding it again returns it as it is. */
  private interface ShieldedCallable<V> extends Callable<V> {}

  /** A shielded copy of a {@code StreamingResponseBody}: shielding it again returns it as it is. */
  private interface ShieldedBody extends StreamingResponseBody {}

  /**
   * Stops the workers' threads; work still running goes on, and work taken over from now on runs on
   * the thread that takes it over.
   */
  void shutdown() {
    workers.shutdown();
    takenOver.shutdown();
  }

  /**
   * The work's result. An interrupt of the waiting thread is Spring MVC's cancel at a timeout,
   * whose only purpose is to stop the work, which goes on by design: it is not kept.
   */
  static <V> V await(CompletableFuture<V> result) throws Exception {
    while (true) {
      try {
        return result.get();
      } catch (InterruptedException e) {
        // the work goes on; its result is still this task's
      } catch (ExecutionException e) {
        Throwable cause = e.getCause();
        if (cause instanceof Exception exception) {
          throw exception;
        }
        if (cause instanceof Error error) {
          throw error;
        }
        throw e;
      }
    }
  }

  private static void setMdc(@Nullable Map<String, String> mdc) {
    if (mdc == null) {
      MDC.clear();
    } else {
      MDC.setContextMap(mdc);
    }
  }
}
