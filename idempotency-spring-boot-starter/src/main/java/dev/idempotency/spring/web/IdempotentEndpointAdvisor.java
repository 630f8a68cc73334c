package dev.idempotency.spring.web;

import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.util.Objects;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.Supplier;
import org.aopalliance.aop.Advice;
import org.aopalliance.intercept.MethodInterceptor;
import org.jspecify.annotations.Nullable;
import org.springframework.aop.Pointcut;
import org.springframework.aop.support.AbstractPointcutAdvisor;
import org.springframework.aop.support.annotation.AnnotationMatchingPointcut;
import org.springframework.core.Ordered;
import org.springframework.core.ReactiveAdapter;
import org.springframework.core.ReactiveAdapterRegistry;
import org.springframework.http.ResponseEntity;
import org.springframework.util.ReflectionUtils;
import org.springframework.web.context.request.RequestAttributes;
import org.springframework.web.context.request.RequestContextHolder;
import org.springframework.web.context.request.ServletRequestAttributes;
import org.springframework.web.context.request.ServletWebRequest;
import org.springframework.web.context.request.async.DeferredResult;
import org.springframework.web.context.request.async.WebAsyncTask;
import org.springframework.web.context.request.async.WebAsyncUtils;
import org.springframework.web.servlet.mvc.method.annotation.ResponseBodyEmitter;
import org.springframework.web.servlet.mvc.method.annotation.StreamingResponseBody;

/**
 * Sees an {@link IdempotentEndpoint} handler method start: an advice on the method itself, so it
 * runs after Spring MVC bound and validated the arguments (a request refused by binding or
 * validation never reaches it) and before the method's body. Only a response of a handler that
 * started is stored. It is the innermost advice ({@link Ordered#LOWEST_PRECEDENCE}, and moved to
 * the end of the chain at startup past advice added to the proxy later, such as the method
 * validation of a class-level {@code @Validated} controller), so that a call refused by method
 * security or method validation around it is not counted as started either. The Spring Boot
 * auto-configuration registers it as an infrastructure bean.
 *
 * <p>A returned {@code Callable}, {@code WebAsyncTask} or {@code StreamingResponseBody}, whatever
 * the declared type, is shielded from Spring MVC's interrupt at a container async timeout where
 * Spring MVC picks its handler by the value's runtime class ({@link AsyncWorkShield}); where the
 * declared type accepts the shielded copy, this advice shields it already, so that a return value
 * handler that the application put into the adapter's list after the shield wrapped it cannot
 * bypass the shield. A task still queued in Spring MVC's async executor at the timeout is cancelled
 * by Spring MVC and never runs: nothing was sent, so its key is released and the client's retry
 * runs the handler again.
 *
 * <p>A {@code DeferredResult} (whatever its runtime class), a {@code CompletionStage} (through
 * {@code whenComplete} if it will not convert to a {@code CompletableFuture}), and, behind a
 * declared {@code Object}, a Spring 6 {@code ListenableFuture} or a single-value reactive type, and
 * a {@code ResponseEntity} whose body is a single async value at runtime, are followed: Spring MVC
 * gets a copy, and the handler's own result tells a timed-out call its value. A result it does not
 * follow keeps its key claimed at a timeout ({@link AsyncTimeouts}).
 *
 * <p>When the method returns, before Spring MVC starts any async processing, the starter's own
 * timeout handler is added to the request ({@link AsyncTimeouts#heedTimeoutOf}), so that an
 * application's timeout fallback cannot answer a timeout before the starter has kept the key.
 */
public final class IdempotentEndpointAdvisor extends AbstractPointcutAdvisor {

  private static final long serialVersionUID = 1L;

  private final transient Pointcut pointcut =
      new AnnotationMatchingPointcut(null, IdempotentEndpoint.class, true);

  private static final @Nullable Field RESULT_TIMEOUT = resultField("timeoutValue");
  private static final @Nullable Field RESULT_ERROR_CALLBACK = resultField("errorCallback");
  private static final @Nullable Field RESULT_COMPLETION_CALLBACK =
      resultField("completionCallback");
  private static final @Nullable Method LISTENABLE_COMPLETABLE = listenableCompletable();

  private final transient Supplier<@Nullable AsyncWorkShield> shield;

  private final transient MethodInterceptor advice =
      invocation -> {
        RequestAttributes request = RequestContextHolder.getRequestAttributes();
        if (request != null
            && request.getAttribute(EndpointCall.ATTRIBUTE, RequestAttributes.SCOPE_REQUEST)
                instanceof EndpointCall call) {
          call.handlerStarted();
          Object returned = invocation.proceed();
          call.asyncWork().handlerReturned(returned);
          Class<?> returnType = invocation.getMethod().getReturnType();
          Adapted adapted = null;
          if (returned != null && request instanceof ServletRequestAttributes servlet) {
            // before Spring MVC starts any async processing: the starter learns of a timeout first
            AsyncTimeouts.heedTimeoutOf(WebAsyncUtils.getAsyncManager(servlet.getRequest()));
            adapted = adapted(returned, invocation.getMethod(), call);
            AsyncWorkShield shield = shield();
            if (shield != null) {
              // a replaced outcome that is more async work is followed on the shield's threads
              // (taken here, on the request's thread: its thread context, for whatever thread
              // completes a stage the handler returned)
              call.asyncWork()
                  .followsWith(
                      shield.follower(
                          call,
                          new ServletWebRequest(servlet.getRequest(), servlet.getResponse()),
                          adapted.ownStage()));
              // the last line of defence, for a return value handler the shield has not wrapped
              adapted = adapted.with(shield.shieldedReturn(adapted.value(), returnType, servlet));
            }
          }
          if (adapted == null) {
            adapted = adapted(returned, invocation.getMethod(), call);
          }
          return adapted.followed(call);
        }
        return invocation.proceed();
      };

  /** The application's shield, if it has one. */
  private @Nullable AsyncWorkShield shield() {
    return shield.get();
  }

  /**
   * What the handler returned as the advisor hands it to Spring MVC: a result it follows (see the
   * class's comment) as a copy, with what follows the handler's own result ({@link Adapted}); a
   * stream, {@code Callable} work, or a result it does not follow, as it is.
   *
   * @throws IllegalStateException for a stream of a reactive type behind a declared {@code Object}
   */
  private static Adapted adapted(@Nullable Object returned, Method method, EndpointCall call) {
    Class<?> returnType = method.getReturnType();
    if (isStream(returned)) {
      return new Adapted(returned, null);
    }
    if (returned instanceof ResponseEntity<?> entity
        && returnType.isAssignableFrom(ResponseEntity.class)) {
      Adapted followed = followedBody(entity, call);
      if (followed != null) {
        return followed;
      }
    }
    if (returned instanceof DeferredResult<?> own
        && returnType.isAssignableFrom(DeferredResult.class)) {
      // whatever its runtime class (an anonymous subclass too), where the method may return a
      // plain DeferredResult: declared DeferredResult, or Object (or a type variable), which the
      // start-time check of declared types cannot see; a copy is as good a result
      return observed(own, call);
    }
    Object value = returned;
    if (LISTENABLE_COMPLETABLE != null
        && LISTENABLE_COMPLETABLE.getDeclaringClass().isInstance(value)
        && returnType.isAssignableFrom(CompletableFuture.class)) {
      // a Spring 6 ListenableFuture behind Object (or another type a CompletableFuture fits),
      // which the start-time check of declared types cannot see
      value = ReflectionUtils.invokeMethod(LISTENABLE_COMPLETABLE, value);
    }
    if (value != null && returnType == Object.class && !(value instanceof CompletionStage<?>)) {
      // declared Object (or a type variable), which the start-time check of declared types cannot
      // see: a single value is followed as a CompletableFuture is; a stream refused
      ReactiveAdapter adapter =
          ReactiveAdapterRegistry.getSharedInstance().getAdapter(value.getClass());
      if (adapter != null) {
        if (adapter.isMultiValue()) {
          throw new IllegalStateException(
              "@IdempotentEndpoint "
                  + method
                  + " returned a "
                  + value.getClass().getName()
                  + EndpointStartupChecks.UNFOLLOWED_REACTIVE
                  + "; serve it from Spring WebFlux");
        }
        value = ReactiveValues.firstValue(adapter.toPublisher(value));
      }
    }
    if (value instanceof CompletionStage<?> stage) {
      // At a timeout Spring MVC cancels the stage it got and expires its own adapter of it: it
      // gets a copy, and the handler's own stage tells a timed-out call its result
      if (!returnType.isAssignableFrom(CompletableFuture.class)) {
        // declared a type no CompletableFuture fits: not followed, so a timeout keeps its key
        // claimed (AsyncTimeouts)
        return new Adapted(value, null);
      }
      CompletableFuture<Object> copy = new CompletableFuture<>();
      return new Adapted(copy, () -> handOn(stage, copy, call, result -> result));
    }
    return new Adapted(value, null);
  }

  /** A result Spring MVC writes as a stream, flushed piece by piece: passed on as it comes. */
  private static boolean isStream(@Nullable Object returned) {
    Object body = returned instanceof ResponseEntity<?> entity ? entity.getBody() : returned;
    return body instanceof ResponseBodyEmitter || body instanceof StreamingResponseBody;
  }

  /**
   * The handler's own {@code DeferredResult}, seen through a copy that Spring MVC gets: at a
   * timeout Spring MVC expires the result it drives, so a value the application sets later would be
   * lost to the guard. The application's result is never started, so it never expires: its value,
   * whenever set, reaches the copy (the client's answer, if it still waits) and the call (stored
   * after a timeout). The application's error and completion callbacks run with the copy's; its own
   * timeout callback and timeout result are not used: the guard answers a timeout (409, the key
   * claimed). A value set after the guard completed a detached call's request, before that
   * completion expired the copy, is not dispatched (the container refuses it): the call follows it,
   * and the application's {@code setResult} returns as usual rather than throw the container's
   * refusal.
   */
  private static Adapted observed(DeferredResult<?> own, EndpointCall call) {
    Object timeout = RESULT_TIMEOUT == null ? null : ReflectionUtils.getField(RESULT_TIMEOUT, own);
    DeferredResult<Object> copy = new DeferredResult<>(timeout instanceof Long t ? t : null);
    copy.onError(failure -> forward(own, RESULT_ERROR_CALLBACK, failure));
    copy.onCompletion(() -> forward(own, RESULT_COMPLETION_CALLBACK, null));
    return new Adapted(
        copy,
        () ->
            own.setResultHandler(
                value -> {
                  try {
                    copy.setResult(value);
                  } catch (IllegalStateException refused) {
                    // the container refused Spring MVC's dispatch of the copy (not yet expired):
                    // the starter completed the request itself at its timeout (409), unknown to
                    // Spring MVC; detached, the call follows the value (below), so the
                    // application's setResult does not fail for it
                    if (!call.asyncWork().detached()) {
                      throw refused;
                    }
                  } finally {
                    // also when Spring MVC's dispatch of the copy fails (the server stopped under
                    // it)
                    call.asyncWork().lateResult(value);
                  }
                }));
  }

  /**
   * An entity whose body is a single async value at runtime (a {@code CompletionStage}, a {@code
   * Mono}), which Spring MVC (6.2.9 and later) serves as async work by the body's runtime class,
   * whatever the declared type ({@code ResponseEntity<?>}): Spring MVC gets the entity with a copy
   * of the body, and the handler's own body tells a timed-out call its result, as the entity it
   * completes. Null if the body is not such a value; a stream ({@code Flux}) is not followed.
   */
  private static @Nullable Adapted followedBody(ResponseEntity<?> entity, EndpointCall call) {
    Object body = entity.getBody();
    ReactiveAdapter adapter =
        body == null
            ? null
            : ReactiveAdapterRegistry.getSharedInstance().getAdapter(body.getClass());
    if (adapter == null || adapter.isMultiValue()) {
      return null;
    }
    CompletionStage<?> stage =
        body instanceof CompletionStage<?> own
            ? own
            : ReactiveValues.firstValue(adapter.toPublisher(body));
    CompletableFuture<Object> copy = new CompletableFuture<>();
    return new Adapted(
        withBody(entity, copy),
        () -> handOn(stage, copy, call, value -> dispatched(entity, value)));
  }

  /**
   * The value of an entity's async body as Spring MVC dispatches it: Spring MVC wrote the entity's
   * status and headers to the response when it started the body's async processing, and dispatches
   * the value alone, picking its handler by the value's runtime class. So a {@code Callable} or a
   * {@code WebAsyncTask} is run as if the handler had returned it (not the body of an entity, which
   * Spring MVC would not run), as itself; a {@code ResponseEntity} is rendered as itself, over the
   * entity's status and headers that the response holds already (its status replaces the entity's,
   * its headers are added to the entity's), never as the body of the entity; any other value as the
   * entity it completes.
   */
  private static @Nullable Object dispatched(ResponseEntity<?> entity, @Nullable Object value) {
    return value instanceof Callable<?>
            || value instanceof WebAsyncTask<?>
            || value instanceof ResponseEntity<?>
        ? value
        : withBody(entity, value);
  }

  /**
   * {@code entity}'s status and headers with another body. Built with the builder: the starter is
   * compiled against Spring Framework 6, whose {@code ResponseEntity(body, MultiValueMap, status)}
   * constructor fails on Spring Framework 7 ({@code HttpHeaders} is no longer a {@code
   * MultiValueMap} there: an {@code IncompatibleClassChangeError}).
   */
  static ResponseEntity<Object> withBody(ResponseEntity<?> entity, @Nullable Object body) {
    return ResponseEntity.status(entity.getStatusCode()).headers(entity.getHeaders()).body(body);
  }

  /** A stage's failure as the handler's work threw it. */
  private static Throwable cause(Throwable failure) {
    return failure instanceof CompletionException && failure.getCause() != null
        ? failure.getCause()
        : failure;
  }

  /** Runs one of the application's {@code DeferredResult} callbacks, if it set it. */
  @SuppressWarnings("unchecked")
  private static void forward(
      DeferredResult<?> own, @Nullable Field callbackField, @Nullable Throwable failure) {
    Object callback = callbackField == null ? null : ReflectionUtils.getField(callbackField, own);
    if (callback instanceof Runnable runnable) {
      runnable.run();
    } else if (callback instanceof Consumer<?> consumer) {
      ((Consumer<Throwable>) consumer).accept(failure);
    }
  }

  private static @Nullable Field resultField(String name) {
    return accessible(ReflectionUtils.findField(DeferredResult.class, name));
  }

  /** The field made accessible; null if there is none, or where that is refused. */
  private static @Nullable Field accessible(@Nullable Field field) {
    if (field == null) {
      return null;
    }
    try {
      field.setAccessible(true);
      return field;
    } catch (RuntimeException e) {
      return null;
    }
  }

  /**
   * Tells the call the outcome of the handler's own {@code stage} when it comes ({@link
   * AsyncWork#lateResult}: {@code asLate} makes a value what the call is told), then completes
   * Spring MVC's {@code copy} with it, unless the call was detached first and the starter runs (or
   * awaits) that value itself, more async work ({@link AsyncWork#followsDetached}, decided by what
   * {@code lateResult} saw under the call's lock: a value told before the detach is Spring MVC's).
   * So the value has one owner: completed in the window between the starter's timeout handler,
   * which detached the call, and Spring MVC's, the copy would be set and dispatched, and Spring MVC
   * would run the work a second time (probeY, {@code MvcProbeYStageAtTheDecisionProbeTest}); left
   * unset, Spring MVC's timeout handling reaches the starter's, which answers {@code 409}. A copy
   * completed through {@code whenComplete} also serves a stage that refuses {@code
   * toCompletableFuture()} (the JDK allows that).
   */
  private static void handOn(
      CompletionStage<?> stage,
      CompletableFuture<Object> copy,
      EndpointCall call,
      Function<@Nullable Object, @Nullable Object> asLate) {
    stage.whenComplete(
        (value, failure) -> {
          Object late = failure != null ? cause(failure) : asLate.apply(value);
          try {
            call.asyncWork().lateResult(late);
          } finally {
            if (!call.asyncWork().followsDetached(late)) {
              if (failure != null) {
                copy.completeExceptionally(failure);
              } else {
                copy.complete(value);
              }
            }
          }
        });
  }

  /**
   * Spring Framework 6's {@code ListenableFuture.completable()}, on the class that {@link
   * EndpointStartupChecks#LISTENABLE_FUTURE} looked up by name (Spring Framework 7 has no {@code
   * ListenableFuture}); null where it is not present.
   */
  private static @Nullable Method listenableCompletable() {
    Class<?> listenable = EndpointStartupChecks.LISTENABLE_FUTURE;
    return listenable == null ? null : ReflectionUtils.findMethod(listenable, "completable");
  }

  /**
   * An advisor that leaves the shielding of async work to the return value handlers that an {@link
   * AsyncWorkShield} wrapped.
   */
  public IdempotentEndpointAdvisor() {
    this(() -> null);
  }

  /**
   * Created by the auto-configuration.
   *
   * @param shield the application's {@link AsyncWorkShield}, looked up when a guarded handler
   *     returns (it may supply null: then nothing is shielded here)
   */
  public IdempotentEndpointAdvisor(Supplier<@Nullable AsyncWorkShield> shield) {
    this.shield = Objects.requireNonNull(shield, "shield must not be null");
    setOrder(Ordered.LOWEST_PRECEDENCE);
  }

  @Override
  public Pointcut getPointcut() {
    return pointcut;
  }

  @Override
  public Advice getAdvice() {
    return advice;
  }

  /**
   * The handler's result as the advisor hands it to Spring MVC ({@link #adapted}), and what then
   * tells the call the handler's own result when it comes ({@code following}: null for a result the
   * advisor does not follow). That is registered only once the call's follower is set ({@link
   * #followed}): a result that came already is told at once.
   */
  private record Adapted(@Nullable Object value, @Nullable Runnable following) {

    /**
     * Whether the handler returned its own stage, which an application's thread completes: no
     * thread of the request's runs what follows it ({@link AsyncWorkShield#follower}). Decided on
     * the value as adapted, so on what the advisor follows as a stage (a {@code CompletionStage} or
     * a {@code DeferredResult}, or a {@code ResponseEntity} of one: also a single reactive value
     * behind {@code Object} or in an entity, and a Spring 6 {@code ListenableFuture} behind a type
     * a {@code CompletableFuture} fits, each followed as a {@code CompletableFuture}), and on a
     * stage or {@code DeferredResult} it does not follow, which Spring MVC awaits.
     */
    boolean ownStage() {
      Object body = value instanceof ResponseEntity<?> entity ? entity.getBody() : value;
      return body instanceof CompletionStage<?> || body instanceof DeferredResult<?>;
    }

    /** The same, Spring MVC given {@code other} instead (a shielded copy of the same work). */
    Adapted with(@Nullable Object other) {
      return new Adapted(other, following);
    }

    /**
     * The value for Spring MVC, once what follows the handler's own result is registered; a
     * stream's end is observed if it is cut short.
     */
    @Nullable Object followed(EndpointCall call) {
      if (isStream(value)) {
        call.returnsAStream();
        Object body = value instanceof ResponseEntity<?> entity ? entity.getBody() : value;
        if (body instanceof ResponseBodyEmitter emitter) {
          call.asyncWork().streamEnd().returnsAnEmitter(emitter);
        }
      }
      if (following != null) {
        call.asyncWork().observesLateResult();
        following.run();
      }
      return value;
    }
  }
}
