package dev.idempotency.spring.web;

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
 * recorded (SPEC 13, 16). Work whose task was still queued in Spring MVC's async executor at the
 * timeout never runs (Spring MVC cancelled the task; the key is released: {@link EndpointCall}),
 * nor does work whose key's lease lapsed while it waited (answered 503; SPEC 16: never send on a
 * lapsed lease). The work sees the waiting thread's MDC, locale and request attributes. The pool
 * grows with the waiting threads (one worker per waiting task, so it is bounded by Spring MVC's own
 * async executor) and its idle threads end after a minute.
 */
final class UninterruptedWork {

  private final ExecutorService workers;

  UninterruptedWork() {
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
  }

  /**
   * A {@code StreamingResponseBody}, which Spring MVC runs on its async executor as it runs a
   * {@code Callable} (and interrupts at a timeout), shielded as {@link #shield(Callable,
   * EndpointCall)} shields one: its writing runs on a worker thread, awaited uninterruptibly.
   */
  StreamingResponseBody shield(StreamingResponseBody body, EndpointCall call) {
    if (body instanceof ShieldedBody) {
      return body;
    }
    call.returnsAStream(); // a later stage's stream too: its timeout is a stream's
    AtomicReference<OutputStream> target = new AtomicReference<>();
    Callable<Void> writing =
        shield(
            () -> {
              body.writeTo(target.get());
              return null;
            },
            call);
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
    call.asyncWork().workQueued();
    return (ShieldedCallable<V>)
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
          workers.execute(
              () -> {
                Map<String, String> previousMdc = MDC.getCopyOfContextMap();
                setMdc(mdc);
                LocaleContextHolder.setLocaleContext(locale);
                RequestContextHolder.setRequestAttributes(attributes);
                try {
                  result.complete(work.call());
                } catch (Throwable failure) {
                  result.completeExceptionally(failure);
                } finally {
                  RequestContextHolder.resetRequestAttributes();
                  LocaleContextHolder.resetLocaleContext();
                  setMdc(previousMdc);
                }
              });
          return await(result);
        };
  }

  /** A shielded copy of a {@code Callable}: shielding it again returns it as it is. */
  private interface ShieldedCallable<V> extends Callable<V> {}

  /** A shielded copy of a {@code StreamingResponseBody}: shielding it again returns it as it is. */
  private interface ShieldedBody extends StreamingResponseBody {}

  /** Stops the workers' threads; work still running goes on. */
  void shutdown() {
    workers.shutdown();
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
