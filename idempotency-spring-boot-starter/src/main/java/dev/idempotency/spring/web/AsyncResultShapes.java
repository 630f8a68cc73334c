package dev.idempotency.spring.web;

import java.util.concurrent.Callable;
import java.util.concurrent.CompletionStage;
import org.jspecify.annotations.Nullable;
import org.springframework.core.ReactiveAdapter;
import org.springframework.core.ReactiveAdapterRegistry;
import org.springframework.http.ResponseEntity;
import org.springframework.web.context.request.async.DeferredResult;
import org.springframework.web.context.request.async.WebAsyncTask;
import org.springframework.web.servlet.mvc.method.annotation.ResponseBodyEmitter;
import org.springframework.web.servlet.mvc.method.annotation.StreamingResponseBody;

/**
 * Which results of a handler, or of a stage of its work, are more async work that Spring MVC runs,
 * awaits, starts or subscribes as a later stage, rather than the work's own answer: asked wherever
 * a result that outlives its request is decided ({@link AsyncWork#lateResult}, {@link
 * AsyncWork#takenOverResult}, {@link LaterStages}, {@link DetachedWork}, {@link AsyncDispatches}),
 * so that each place tells them apart the same way. Split out of {@link AsyncWork}.
 */
final class AsyncResultShapes {

  private AsyncResultShapes() {}

  /**
   * Whether {@code result} (or the body of a {@code ResponseEntity} of it) is more async work: a
   * {@code Callable}, a {@code WebAsyncTask}, a {@code StreamingResponseBody}, a {@code
   * DeferredResult}, a {@code CompletionStage}, an emitter, or a value of a reactive type (a single
   * one, {@link #singleReactiveValue}: a {@code Mono}; or a stream, {@link #reactiveStream}: a
   * {@code Flux}), which Spring MVC runs, awaits, starts or subscribes as a later stage, never the
   * work's own answer.
   */
  static boolean moreAsyncWork(@Nullable Object result) {
    Object value = result instanceof ResponseEntity<?> entity ? entity.getBody() : result;
    return value instanceof Callable<?>
        || value instanceof WebAsyncTask<?>
        || value instanceof StreamingResponseBody
        || value instanceof DeferredResult<?>
        || value instanceof CompletionStage<?>
        || value instanceof ResponseBodyEmitter
        || singleReactiveValue(value)
        || reactiveStream(value);
  }

  /**
   * Whether {@code value} is a single value of a reactive type (a {@code Mono}, lazy or not, a
   * {@code Callable} too or not), which Spring MVC's reactive return value handler, the first to
   * take it, subscribes and awaits as a {@code DeferredResult}: more async work, whose value is the
   * answer. Spring's shared adapter registry is the one Spring MVC uses unless the application
   * gives its adapter another. A stream of a reactive type (a {@code Flux}) is not one.
   */
  static boolean singleReactiveValue(@Nullable Object value) {
    if (value == null) {
      return false;
    }
    ReactiveAdapter adapter =
        ReactiveAdapterRegistry.getSharedInstance().getAdapter(value.getClass());
    return adapter != null && !adapter.isMultiValue();
  }

  /**
   * Whether {@code value} is a stream of a reactive type (a {@code Flux}), which Spring MVC's
   * reactive return value handler subscribes and collects to its end (unless the request asks for a
   * streaming media type): more async work, which may send when subscribed. A late one is
   * subscribed to its end and recorded as answered without its body ({@link LaterStages}): the
   * starter does not render its values, and a retry gets {@code 422 response-not-stored}, never a
   * second send.
   */
  static boolean reactiveStream(@Nullable Object value) {
    if (value == null) {
      return false;
    }
    ReactiveAdapter adapter =
        ReactiveAdapterRegistry.getSharedInstance().getAdapter(value.getClass());
    return adapter != null && adapter.isMultiValue();
  }
}
