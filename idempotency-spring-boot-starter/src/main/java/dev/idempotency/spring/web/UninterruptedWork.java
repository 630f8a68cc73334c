package dev.idempotency.spring.web;

import static dev.idempotency.spring.web.DecoratedRun.GIVEN_UP;
import static dev.idempotency.spring.web.DecoratedRun.NOT_RUN;
import static dev.idempotency.spring.web.DecoratedRun.RUNNING;
import static dev.idempotency.spring.web.DecoratedRun.notRun;
import static dev.idempotency.spring.web.DecoratedRun.runDecorated;
import static dev.idempotency.spring.web.DecoratedRun.setMdc;

import dev.idempotency.KeyStoreException;
import java.io.IOException;
import java.io.OutputStream;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
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
import org.springframework.web.context.request.RequestAttributes;
import org.springframework.web.context.request.RequestContextHolder;
import org.springframework.web.servlet.mvc.method.annotation.StreamingResponseBody;

/**
 * Runs an endpoint's {@code Callable} on a thread of its own, while Spring MVC's task thread waits
 * for it without heeding interrupts. At a container async timeout Spring MVC cancels its task with
 * an interrupt ({@code future.cancel(true)}) before any timeout handler runs; a provider call that
 * is interruptible ({@code HttpClient.send}) would then fail after the provider got the request,
 * and the key would be released or never reported. Shielded so, the send goes on and its outcome is
 * recorded (SPEC 13, 16). Work whose task is still queued in Spring MVC's async executor at a
 * timeout (Spring MVC cancels the task) or a shutdown is taken over ({@link
 * AsyncWork#takeOverQueuedWork}): it runs here instead ({@link DetachedWork}), detached from its
 * request, on a pool of at most {@link #TAKEN_OVER_THREADS} daemon threads, or, when they are all
 * busy or the pool was shut down, on the thread that takes it over (the container's, at a timeout;
 * the one stopping the context, at a shutdown): neither dropping it nor releasing its key is safe.
 * Work whose key's lease lapsed while it waited does not run (answered 503, or released once taken
 * over; SPEC 16: never send on a lapsed lease). Work that began on Spring MVC's task and whose
 * request a timeout or a shutdown detached, and whose result then is more async work (a {@code
 * DeferredResult} an application thread sets later, a {@code CompletionStage}, a later {@code
 * Callable}), which Spring MVC never runs once its request ended, has that result run to its end,
 * or awaited ({@link LaterStages}), on the same pool, as the later stages of work taken over are
 * ({@link AsyncWork.Queued#continueDetached}). The work sees the waiting thread's MDC, locale and
 * request attributes, and what Spring MVC gives its own task thread: the request's callable
 * interceptors run around it and the application's task decorator wraps it ({@link
 * TaskThreadContext}); a decorator that refuses to wrap the work, or whose wrapper ends without
 * running it, ends the call on every path: the work never runs after that, and nothing of it was
 * sent ({@link DecoratedRun#givenUp}). Taken over, the work gets request attributes of its own over
 * its request (or that request's copy, once it ended), active while it runs, as Spring MVC's task
 * thread gets them from {@code FrameworkServlet}. The pool grows with the waiting threads (one
 * worker per waiting task, so it is bounded by Spring MVC's own async executor) and its idle
 * threads end after a minute.
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

  private final ExecutorService workers;
  private final DetachedWork detachedWork;

  UninterruptedWork() {
    this(TAKEN_OVER_THREADS);
  }

  /**
   * @param takenOverThreads how many threads run work taken over at once at most
   */
  UninterruptedWork(int takenOverThreads) {
    AtomicInteger count = new AtomicInteger();
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
    detachedWork = new DetachedWork(takenOverThreads, workers);
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
            detachedWork.detached(
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
        detachedWork.detached(work, StarterRun.ofThisThread(call, context), null, true, false),
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
   * What follows {@code call}'s async outcomes that Spring MVC will neither run nor follow, made on
   * the request's thread as its handler returns ({@link DetachedWork#follower}).
   *
   * @param ownStage whether the handler returned its own stage (no {@code Callable})
   */
  AsyncWork.Follower follower(EndpointCall call, TaskThreadContext context, boolean ownStage) {
    return detachedWork.follower(call, context, ownStage);
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
    detachedWork.shutdown();
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
}
