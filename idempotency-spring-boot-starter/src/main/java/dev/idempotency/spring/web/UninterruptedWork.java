package dev.idempotency.spring.web;

import dev.idempotency.KeyStoreException;
import jakarta.servlet.http.HttpServletRequest;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.lang.reflect.Method;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
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
import org.springframework.web.context.request.async.DeferredResult;
import org.springframework.web.context.request.async.DeferredResultProcessingInterceptor;
import org.springframework.web.context.request.async.WebAsyncTask;
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
 * MVC never runs once its request ended, has that result run to its end, or awaited, on the same
 * pool, as the later stages of work taken over are ({@link AsyncWork.Queued#continueDetached}). The
 * work sees the waiting thread's MDC, locale and request attributes, and what Spring MVC gives its
 * own task thread: the request's callable interceptors run around it and the application's task
 * decorator wraps it ({@link TaskThreadContext}); a decorator's wrapper that ends without running
 * the work ends the call as that failure (nothing was sent), on every path. Taken over, the work
 * gets request attributes of its own over its request (or that request's copy, once it ended),
 * active while it runs, as Spring MVC's task thread gets them from {@code FrameworkServlet}. The
 * pool grows with the waiting threads (one worker per waiting task, so it is bounded by Spring
 * MVC's own async executor) and its idle threads end after a minute.
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

  /**
   * {@code DeferredResult.getLifecycleInterceptor()}, package-private in Spring 6.2 and 7.0: the
   * interceptor through which Spring MVC runs a {@code DeferredResult}'s {@code onTimeout} callback
   * and sets its timeout result at a timeout, and marks it expired at the request's end. Reached by
   * reflection, since nothing public does either; null if it cannot be (then a later {@code
   * DeferredResult} unset at its timeout is recorded as answered without its body).
   */
  private static final @Nullable Method LIFECYCLE = deferredMethod("getLifecycleInterceptor");

  /**
   * {@code DeferredResult.getTimeoutValue()}, package-private in Spring 6.2 and 7.0 (Spring MVC
   * reads it to set the request's timeout); reached by reflection, null if it cannot be (then the
   * request's async timeout bounds the wait).
   */
  private static final @Nullable Method TIMEOUT_VALUE = deferredMethod("getTimeoutValue");

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
                call,
                buffered,
                context),
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
    return shield(work, call, detached(work, call, null, context), context);
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
                  result.completeExceptionally(notRun(failure));
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
   * {@code work} as the starter runs it if it takes it over, still queued, at a timeout or a
   * shutdown ({@link AsyncWork#takeOverQueuedWork}): on a thread of its own, detached from the
   * request (with the MDC and locale the request's thread had when the work was queued, and request
   * attributes of its own over that thread's request: {@link #attributesOfTheTakenOverRun}), unless
   * its key's lease lapsed meanwhile (a {@code KeyStoreException}, as for work that waited in
   * Spring MVC's queue). A result that is more async work is run to its end as Spring MVC would run
   * it (a {@code Callable}, a {@code WebAsyncTask}'s callable, a {@code CompletionStage} or a
   * {@code DeferredResult} awaited, a {@code StreamingResponseBody} written to nowhere); the end
   * goes to {@link AsyncWork#takenOverResult}. If the application's task decorator's wrapper ends
   * without running the work (it throws before it), nothing was sent: that failure is the work's
   * end ({@link #notRun}), and the work never runs after it.
   *
   * @param body for a stream's work, what it writes; else null
   */
  private AsyncWork.Queued detached(
      Callable<?> work,
      EndpointCall call,
      AsyncWork.@Nullable WrittenBody body,
      TaskThreadContext context) {
    Map<String, String> mdc = MDC.getCopyOfContextMap();
    LocaleContext locale = LocaleContextHolder.getLocaleContext();
    RequestAttributes attributes = RequestContextHolder.getRequestAttributes();
    // a later DeferredResult's wait ends at its timeout, else the request's async timeout (read
    // when the work is taken over, or its request detached, the request async by then), or when
    // the close grace runs out
    long[] asyncTimeout = {DEFAULT_ASYNC_TIMEOUT_MILLIS};
    CompletableFuture<Void> graceRunsOut = new CompletableFuture<>();
    // decorated now, on the request's thread, where Spring MVC's executor would have decorated its
    // task (the thread that takes it over, a container's, has none of the request's context); if
    // the work starts on Spring MVC's task instead, the decorated task is run then with nothing to
    // do (notTakenOver), so every task the application's decorator wraps runs once (a decorator
    // that takes something when it decorates gives it back when its task runs)
    AtomicInteger run = new AtomicInteger(NOT_RUN);
    StarterRun starterRun = new StarterRun(call, mdc, locale, attributes, context);
    Runnable detachedRun =
        starterRun.decorated(
            run,
            true,
            false,
            laterStageRan -> runToItsEnd(work, laterStageRan, asyncTimeout[0], graceRunsOut));
    return new AsyncWork.Queued() {
      @Override
      public void runDetached() {
        asyncTimeout[0] = asyncTimeoutOf(attributes);
        onATakenOverThread(detachedRun, run, call, false, false);
      }

      @Override
      public void requestDetached() {
        asyncTimeout[0] = asyncTimeoutOf(attributes);
      }

      @Override
      public void continueDetached(@Nullable Object result, boolean laterStageRan) {
        // decorated here, on Spring MVC's task thread, which its own decoration set up
        AtomicInteger continued = new AtomicInteger(NOT_RUN);
        Runnable continuation =
            starterRun.decorated(
                continued,
                false,
                laterStageRan,
                ran -> continueToItsEnd(result, ran, asyncTimeout[0], graceRunsOut));
        // a decorator that never runs it: a stage ran, and what completes its result may send
        onATakenOverThread(continuation, continued, call, true, true);
      }

      @Override
      public void graceRunsOut() {
        graceRunsOut.complete(null);
      }

      @Override
      public void notTakenOver() {
        if (context.decorates() && run.compareAndSet(NOT_RUN, ENDED)) {
          detachedRun.run(); // only the decorator's own wrapping runs
        }
      }

      @Override
      public AsyncWork.@Nullable WrittenBody body() {
        return body;
      }
    };
  }

  /**
   * Runs {@code decorated} (a {@link StarterRun}'s) on a thread of the taken-over pool, or, when
   * they are all busy, on this one. If the application's decorator's wrapper ends without running
   * it, nothing of it ran: that failure is the work's end ({@link #notRun}), and it never runs
   * after that.
   *
   * @param laterStageRan whether a stage of the work ran before ({@link
   *     AsyncWork#takenOverResult}), for that failure
   */
  private void onATakenOverThread(
      Runnable decorated,
      AtomicInteger run,
      EndpointCall call,
      boolean laterStageRan,
      boolean continuation) {
    Runnable task =
        () -> {
          @Nullable Throwable failure = runDecorated(decorated);
          if (run.compareAndSet(NOT_RUN, GIVEN_UP)) {
            // the decorator's wrapper ended without running the work: nothing was sent, so
            // the call ends as that failure (else nothing ends it, the key claimed)
            call.asyncWork().takenOverResult(notRun(failure), laterStageRan);
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

  /** Stages of work the starter runs detached from its request ({@link StarterRun}). */
  private interface Stages {
    /**
     * Runs them to their end: their result.
     *
     * @param laterStageRan set once a later stage runs ({@link #runToItsEnd})
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
    Map<String, String> mdc = MDC.getCopyOfContextMap();
    LocaleContext locale = LocaleContextHolder.getLocaleContext();
    RequestAttributes attributes = RequestContextHolder.getRequestAttributes();
    TaskThreadContext own = ownStage ? context.decoratingHere() : context;
    StarterRun starterRun = new StarterRun(call, mdc, locale, attributes, own);
    return new AsyncWork.Follower() {
      @Override
      public AsyncWork.Queued follow(@Nullable Object outcome) {
        return following(outcome, starterRun);
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
   * {@code outcome} as {@link #follower} follows it: {@link AsyncWork.Queued#runDetached} runs it
   * to its end ({@link #runToItsEnd}), {@link AsyncWork.Queued#continueDetached} continues it from
   * the result given; each on the starter's threads, decorated then ({@link #onATakenOverThread}).
   * A later {@code DeferredResult} with no timeout of its own is awaited for the request's async
   * timeout, read when the outcome is run (its request async then), else {@link
   * #DEFAULT_ASYNC_TIMEOUT_MILLIS}.
   */
  private AsyncWork.Queued following(@Nullable Object outcome, StarterRun starterRun) {
    EndpointCall call = starterRun.call();
    CompletableFuture<Void> graceRunsOut = new CompletableFuture<>();
    return new AsyncWork.Queued() {
      @Override
      public void runDetached() {
        long asyncTimeout = asyncTimeoutOf(starterRun.attributes());
        AtomicInteger run = new AtomicInteger(NOT_RUN);
        Runnable followed =
            starterRun.decorated(
                run,
                true,
                false,
                ran -> runToItsEnd(() -> outcome, ran, asyncTimeout, graceRunsOut));
        onATakenOverThread(followed, run, call, false, false);
      }

      @Override
      public void continueDetached(@Nullable Object result, boolean laterStageRan) {
        AtomicInteger continued = new AtomicInteger(NOT_RUN);
        Runnable continuation =
            starterRun.decorated(
                continued,
                false,
                laterStageRan,
                ran -> continueToItsEnd(result, ran, DEFAULT_ASYNC_TIMEOUT_MILLIS, graceRunsOut));
        // a decorator that never runs it: a stage ran, and what completes its result may send
        onATakenOverThread(continuation, continued, call, true, true);
      }

      @Override
      public void graceRunsOut() {
        graceRunsOut.complete(null);
      }

      @Override
      public AsyncWork.@Nullable WrittenBody body() {
        return null;
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
   * running the work ({@code failure}, what it threw, or null if it returned): nothing was sent, so
   * the call ends as a failure of the work before it sent would (through the application's
   * exception resolvers: one nothing maps releases the key), never held claimed by work that will
   * never run.
   */
  private static Throwable notRun(@Nullable Throwable failure) {
    log.warn(
        "The application's task decorator ended without running an idempotent endpoint's work on"
            + " the starter's thread; nothing was sent, the call ends as a failure: {}",
        failure == null ? "it returned without running it" : failure.getClass().getName());
    return failure != null
        ? failure
        : new IllegalStateException(
            "the application's task decorator returned without running the work; nothing was"
                + " sent");
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
   * {@code work}'s result, run to its end as Spring MVC would run it: a result that is more async
   * work is run too ({@link #detached}); {@code laterStageRan[0]} is set once a later stage runs
   * (before it runs: its failure is a later stage's, after a stage that may have sent). A {@code
   * DeferredResult} or {@code CompletionStage} that holds its result when the stage that returned
   * it ended ({@link SettledResults}) is no later stage: its value (an emitter, say, then followed
   * to its end by {@link AsyncWork#takenOverResult}) is that stage's own.
   *
   * @param asyncTimeout how long a later {@code DeferredResult} with no timeout of its own is
   *     awaited, in milliseconds (zero or less: without limit, as the servlet container would)
   * @param graceRunsOut completed when the guard's close grace is about to run out
   */
  private static @Nullable Object runToItsEnd(
      Callable<?> work,
      boolean[] laterStageRan,
      long asyncTimeout,
      CompletableFuture<Void> graceRunsOut)
      throws Exception {
    return continueToItsEnd(work.call(), laterStageRan, asyncTimeout, graceRunsOut);
  }

  /**
   * {@link #runToItsEnd} from {@code first}, the result of a stage that ran already: more async
   * work is run too, or awaited, as after a first stage there.
   */
  private static @Nullable Object continueToItsEnd(
      @Nullable Object first,
      boolean[] laterStageRan,
      long asyncTimeout,
      CompletableFuture<Void> graceRunsOut)
      throws Exception {
    @Nullable Object result = first;
    while (true) {
      Object value = asyncBodyOf(result);
      // a value the stage that returned it had set already is that stage's own result
      boolean sameStage = SettledResults.settled(value);
      if (value instanceof Callable<?> next) {
        laterStageRan[0] = true;
        result = next.call();
      } else if (value instanceof WebAsyncTask<?> task) {
        laterStageRan[0] = true;
        result = task.getCallable().call();
      } else if (value instanceof CompletionStage<?> stage) {
        result = withEntityOf(result, awaitStage(stage));
      } else if (value instanceof DeferredResult<?> deferred) {
        Object awaited = awaitDeferred(deferred, asyncTimeout, graceRunsOut);
        if (awaited == deferred) {
          result = deferred;
          break; // nothing answered it: recorded as answered without its body
        }
        result = withEntityOf(result, awaited);
      } else if (value instanceof StreamingResponseBody stream) {
        laterStageRan[0] = true;
        stream.writeTo(OutputStream.nullOutputStream());
        break; // answered without its body
      } else {
        break;
      }
      laterStageRan[0] |= !sameStage;
    }
    return result;
  }

  /**
   * The async value a {@code ResponseEntity} holds as its body (a {@code StreamingResponseBody}, a
   * {@code CompletionStage} or a {@code DeferredResult}, which Spring MVC runs or awaits as it
   * would the value itself), else {@code result} itself.
   */
  private static @Nullable Object asyncBodyOf(@Nullable Object result) {
    if (result instanceof ResponseEntity<?> entity) {
      Object body = entity.getBody();
      if (body instanceof StreamingResponseBody
          || body instanceof CompletionStage<?>
          || body instanceof DeferredResult<?>) {
        return body;
      }
    }
    return result;
  }

  /**
   * {@code value}, awaited from the body of {@code holder}, as Spring MVC renders it: with the
   * entity's status and headers if {@code holder} is a {@code ResponseEntity} (and the value not
   * one itself); else the value as it is.
   */
  private static @Nullable Object withEntityOf(@Nullable Object holder, @Nullable Object value) {
    if (holder instanceof ResponseEntity<?> entity && !(value instanceof ResponseEntity<?>)) {
      return ResponseEntity.status(entity.getStatusCode()).headers(entity.getHeaders()).body(value);
    }
    return value;
  }

  /** The value of a later stage that a taken-over work returned, or its failure, thrown. */
  private static @Nullable Object awaitStage(CompletionStage<?> stage) throws Exception {
    return await(stage.toCompletableFuture());
  }

  /**
   * The value of a later {@code DeferredResult} that a taken-over work returned, as Spring MVC
   * would have dispatched it: an error result that is a {@code Throwable} is its failure, thrown;
   * any other (a value, or an error result that is not a {@code Throwable}) is its value. Spring
   * MVC never got it (the work was taken over), so nothing else sets its result handler or expires
   * it: it is awaited until its own timeout ({@link #TIMEOUT_VALUE}), else the request's async
   * timeout, or until the guard's close grace is about to run out at a shutdown, whichever comes
   * first; then it is expired as Spring MVC expires one at its timeout ({@link #expire}: its {@code
   * onTimeout} callback, then its timeout result, if any). The application's own {@code
   * DeferredResultProcessingInterceptor}s are not run: the request is gone. If nothing answered it
   * even then, the stage that returned it ran and may have sent, and nothing reports whether it
   * did: the {@code DeferredResult} itself is returned, recorded as answered without its body
   * ({@link AsyncWork#takenOverResult}), never released (SPEC 1).
   */
  private static @Nullable Object awaitDeferred(
      DeferredResult<?> deferred, long asyncTimeout, CompletableFuture<Void> graceRunsOut)
      throws Exception {
    CompletableFuture<@Nullable Object> value = new CompletableFuture<>();
    deferred.setResultHandler(value::complete);
    Long own = timeoutOf(deferred);
    long timeout = own != null ? own : asyncTimeout;
    CompletableFuture<@Nullable Object> ends = new CompletableFuture<>();
    value.thenAccept(ends::complete);
    graceRunsOut.thenRun(() -> ends.complete(null));
    if (timeout > 0) {
      CompletableFuture.delayedExecutor(timeout, TimeUnit.MILLISECONDS)
          .execute(() -> ends.complete(null));
    }
    await(ends);
    if (!value.isDone()) {
      expire(deferred); // its timeout answer, if any, comes through the result handler
    }
    completed(deferred);
    if (!value.isDone()) {
      return deferred; // no answer: recorded as answered without its body
    }
    Object result = value.join();
    if (result instanceof Exception failure) {
      throw failure;
    }
    if (result instanceof Error failure) {
      throw failure;
    }
    if (result instanceof Throwable failure) {
      throw new ExecutionException(failure);
    }
    return result;
  }

  /**
   * What Spring MVC does at a {@code DeferredResult}'s timeout, before its own fallback: the
   * result's lifecycle interceptor runs its {@code onTimeout} callback, then sets its timeout
   * result if it has one. Reached by reflection ({@link #LIFECYCLE}); if that fails, nothing is
   * set, and the result is recorded as answered without its body (fail safe: no second send).
   */
  private static void expire(DeferredResult<?> deferred) {
    DeferredResultProcessingInterceptor lifecycle = lifecycleOf(deferred);
    if (lifecycle == null) {
      return;
    }
    try {
      lifecycle.handleTimeout(null, deferred); // Spring's own interceptor reads no request
    } catch (Exception e) {
      log.debug("A taken-over DeferredResult's timeout handling failed", e);
    }
  }

  /**
   * What Spring MVC does as the request of a {@code DeferredResult} completes: the result is marked
   * expired (nothing sets it any more) and its {@code onCompletion} callback runs.
   */
  private static void completed(DeferredResult<?> deferred) {
    DeferredResultProcessingInterceptor lifecycle = lifecycleOf(deferred);
    if (lifecycle == null) {
      return;
    }
    try {
      lifecycle.afterCompletion(null, deferred);
    } catch (Exception e) {
      log.debug("A taken-over DeferredResult's completion callback failed", e);
    }
  }

  @SuppressWarnings("NullAway") // Spring's lifecycle interceptor never reads its request
  private static @Nullable DeferredResultProcessingInterceptor lifecycleOf(
      DeferredResult<?> deferred) {
    Method method = LIFECYCLE;
    if (method == null) {
      return null;
    }
    try {
      return method.invoke(deferred) instanceof DeferredResultProcessingInterceptor lifecycle
          ? lifecycle
          : null;
    } catch (ReflectiveOperationException | RuntimeException e) {
      log.debug("A taken-over DeferredResult's lifecycle could not be reached", e);
      return null;
    }
  }

  /** The {@code DeferredResult}'s own timeout, in milliseconds; null if it has none, or unread. */
  private static @Nullable Long timeoutOf(DeferredResult<?> deferred) {
    Method method = TIMEOUT_VALUE;
    if (method == null) {
      return null;
    }
    try {
      return method.invoke(deferred) instanceof Long timeout ? timeout : null;
    } catch (ReflectiveOperationException | RuntimeException e) {
      log.debug("A taken-over DeferredResult's timeout could not be read", e);
      return null;
    }
  }

  private static @Nullable Method deferredMethod(String name) {
    try {
      Method method = DeferredResult.class.getDeclaredMethod(name);
      method.setAccessible(true);
      return method;
    } catch (ReflectiveOperationException | RuntimeException e) {
      log.debug("DeferredResult.{} cannot be reached", name, e);
      return null;
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
  private static <V> V await(CompletableFuture<V> result) throws Exception {
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
