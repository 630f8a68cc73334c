package dev.idempotency.spring.web;

import java.io.OutputStream;
import java.lang.reflect.Method;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.core.ReactiveAdapter;
import org.springframework.core.ReactiveAdapterRegistry;
import org.springframework.http.ResponseEntity;
import org.springframework.web.context.request.async.DeferredResult;
import org.springframework.web.context.request.async.DeferredResultProcessingInterceptor;
import org.springframework.web.context.request.async.WebAsyncTask;
import org.springframework.web.servlet.mvc.method.annotation.StreamingResponseBody;

/**
 * The later stages of work the starter runs detached from its request ({@link UninterruptedWork}),
 * run to their end as Spring MVC would run them: a {@code Callable}, a {@code WebAsyncTask}'s
 * callable, a {@code CompletionStage} or a {@code DeferredResult} awaited, a single reactive value
 * (a {@code Mono}) subscribed and awaited, a reactive stream (a {@code Flux}) subscribed to its end
 * (then recorded as answered without its body), a {@code StreamingResponseBody} written to nowhere.
 * Spring MVC never runs them once their request ended, and nothing else sets a later {@code
 * DeferredResult}'s result handler or expires it: here it is awaited until its own timeout, else
 * the request's, or until the guard's close grace is about to run out at a shutdown, then expired
 * as Spring MVC expires one.
 */
final class LaterStages {

  /** Under UninterruptedWork's logger, as before this class was split out of it. */
  private static final Logger log = LoggerFactory.getLogger(UninterruptedWork.class);

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

  /**
   * {@code work}'s result, run to its end as Spring MVC would run it: a result that is more async
   * work is run too (as {@link UninterruptedWork} runs detached work); {@code laterStageRan[0]} is
   * set once a later stage runs (before it runs: its failure is a later stage's, after a stage that
   * may have sent). A single reactive value (a {@code Mono}) that a stage returned is no later
   * stage, as a {@code CompletionStage} it returned is none: it is that stage's own pending outcome
   * (a {@code WebClient} call's), so its failure before it ends (its provider refused) is decided
   * as that stage's own failure, as Spring MVC decides it on time (one nothing maps is a {@code
   * 500}, the key released, SPEC 6 "the sender throws"). That adds no second send to what the same
   * request does on time: a stage that sent and then returned a value that fails is released there
   * too. Counted as a later stage, a send that the {@code Mono} itself is would be lost (its
   * failure recorded as answered, the retry {@code 422 response-not-stored}). After a later stage
   * ran, its failure is still recorded as answered. A {@code DeferredResult} or {@code
   * CompletionStage} that holds its result when the stage that returned it ended ({@link
   * SettledResults}) is no later stage: its value (an emitter, say, then followed to its end by
   * {@link AsyncWork#takenOverResult}) is that stage's own.
   *
   * @param asyncTimeout how long a later {@code DeferredResult} with no timeout of its own is
   *     awaited, in milliseconds (zero or less: without limit, as the servlet container would)
   * @param graceRunsOut completed when the guard's close grace is about to run out
   */
  static @Nullable Object runToItsEnd(
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
  static @Nullable Object continueToItsEnd(
      @Nullable Object first,
      boolean[] laterStageRan,
      long asyncTimeout,
      CompletableFuture<Void> graceRunsOut)
      throws Exception {
    return continueToItsEnd(first, laterStageRan, asyncTimeout, graceRunsOut, false);
  }

  /**
   * {@link #continueToItsEnd}; if {@code firstAsOnTime}, the first stage run from {@code first}
   * (the late value of a handler's own stage, which nothing of the work's ran before: a {@code
   * Callable}, a {@code WebAsyncTask}, a reactive value) is not counted as a later stage: its
   * failure is decided as Spring MVC decides it on time, through the exception resolvers (one
   * nothing maps releases the key), not recorded as answered.
   */
  static @Nullable Object continueToItsEnd(
      @Nullable Object first,
      boolean[] laterStageRan,
      long asyncTimeout,
      CompletableFuture<Void> graceRunsOut,
      boolean firstAsOnTime)
      throws Exception {
    @Nullable Object result = first;
    boolean later = !firstAsOnTime; // whether the next stage to run is a later stage
    while (true) {
      Object value = asyncBodyOf(result);
      // a value the stage that returned it had set already is that stage's own result
      boolean sameStage = SettledResults.settled(value);
      if (!(value instanceof CompletionStage<?>) && AsyncResultShapes.singleReactiveValue(value)) {
        // subscribed as Spring MVC's reactive return value handler subscribes it (before it
        // would run it as a Callable, as Mono.fromCallable is too); its failure is that of the
        // stage that returned it, as a CompletionStage's is (see the method's comment)
        result = withEntityOf(result, awaitStage(SingleValue.subscribed(value)));
      } else if (AsyncResultShapes.reactiveStream(value)) {
        // subscribed to its end as Spring MVC's reactive return value handler subscribes one (it
        // may send when subscribed); its values are not rendered here: the stream itself is the
        // result, recorded as answered without its body, and its failure is a later stage's
        laterStageRan[0] |= later;
        awaitStage(SingleValue.ended(value));
        break;
      } else if (value instanceof Callable<?> next) {
        laterStageRan[0] |= later;
        result = next.call();
      } else if (value instanceof WebAsyncTask<?> task) {
        laterStageRan[0] |= later;
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
      later = true;
    }
    return result;
  }

  /**
   * The async value a {@code ResponseEntity} holds as its body (a {@code StreamingResponseBody}, a
   * {@code CompletionStage}, a {@code DeferredResult} or a reactive value, which Spring MVC runs,
   * awaits or subscribes as it would the value itself), else {@code result} itself.
   */
  private static @Nullable Object asyncBodyOf(@Nullable Object result) {
    if (result instanceof ResponseEntity<?> entity) {
      Object body = entity.getBody();
      if (body instanceof StreamingResponseBody
          || body instanceof CompletionStage<?>
          || body instanceof DeferredResult<?>
          || AsyncResultShapes.singleReactiveValue(body)
          || AsyncResultShapes.reactiveStream(body)) {
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
    return UninterruptedWork.await(stage.toCompletableFuture());
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
    UninterruptedWork.await(ends);
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
   * A single reactive value ({@link AsyncResultShapes#singleReactiveValue}: a {@code Mono})
   * subscribed, as Spring MVC's reactive return value handler subscribes one it got (or a stream
   * drained: {@link #ended}): its first value, or null if it completes empty, or its failure.
   * Loaded only when such a value comes, so an application without Reactive Streams on its class
   * path never needs them.
   */
  private static final class SingleValue {
    static CompletableFuture<@Nullable Object> subscribed(Object value) {
      return ReactiveValues.firstValue(adapterOf(value).toPublisher(value));
    }

    /**
     * A reactive stream ({@link AsyncResultShapes#reactiveStream}: a {@code Flux}) subscribed and
     * drained to its end, as Spring MVC's reactive return value handler collects one: completed
     * (with null) when it completes, or with its failure.
     */
    static CompletableFuture<@Nullable Object> ended(Object value) {
      return ReactiveValues.drained(adapterOf(value).toPublisher(value));
    }

    private static ReactiveAdapter adapterOf(Object value) {
      ReactiveAdapter adapter =
          ReactiveAdapterRegistry.getSharedInstance().getAdapter(value.getClass());
      if (adapter == null) {
        throw new IllegalStateException("no reactive adapter for " + value.getClass().getName());
      }
      return adapter;
    }
  }

  private LaterStages() {}
}
