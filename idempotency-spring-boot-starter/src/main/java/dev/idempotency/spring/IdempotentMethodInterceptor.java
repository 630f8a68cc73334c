package dev.idempotency.spring;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.Outcome;
import dev.idempotency.ResultCodec;
import dev.idempotency.SendFailedException;
import java.lang.reflect.UndeclaredThrowableException;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.function.Supplier;
import org.aopalliance.intercept.MethodInterceptor;
import org.aopalliance.intercept.MethodInvocation;
import org.springframework.aop.support.AopUtils;

/** Runs an {@link Idempotent} method through the guard: once per key, repeats replayed. */
final class IdempotentMethodInterceptor implements MethodInterceptor {

  private final IdempotentMethods methods;
  private final Supplier<IdempotencyGuard> guard;
  private final Supplier<JsonCodecs> json;
  private final Supplier<Duration> defaultTtl;

  IdempotentMethodInterceptor(
      IdempotentMethods methods,
      Supplier<IdempotencyGuard> guard,
      Supplier<JsonCodecs> json,
      Supplier<Duration> defaultTtl) {
    this.methods = methods;
    this.guard = guard;
    this.json = json;
    this.defaultTtl = defaultTtl;
  }

  @Override
  public Object invoke(MethodInvocation invocation) throws Throwable {
    Object target = invocation.getThis();
    Class<?> targetClass =
        target != null
            ? AopUtils.getTargetClass(target)
            : invocation.getMethod().getDeclaringClass();
    IdempotentMethod method = methods.find(invocation.getMethod(), targetClass);
    if (method == null) {
      return invocation.proceed();
    }
    IdempotencyRequest request =
        IdempotencyRequest.of(
                method.key(target, invocation.getArguments()),
                method.ttl != null ? method.ttl : defaultTtl.get())
            .withOperation(method.name);
    ResultCodec<Object> codec = methods.codec(method, json);
    Throwable[] thrown = new Throwable[1];
    if (method.kind == IdempotentMethod.Kind.STAGE) {
      CompletableFuture<Object> result = new CompletableFuture<>();
      guard
          .get()
          .executeForOutcomeAsync(request, codec, context -> stage(proceed(invocation, thrown)))
          .whenComplete(
              (outcome, error) -> {
                if (error == null) {
                  result.complete(outcome.value());
                } else {
                  result.completeExceptionally(ownFailure(unwrap(error), thrown));
                }
              });
      return result;
    }
    try {
      Outcome<Object> outcome =
          guard.get().executeForOutcome(request, codec, context -> proceed(invocation, thrown));
      return method.kind == IdempotentMethod.Kind.VOID ? null : outcome.value();
    } catch (SendFailedException e) {
      throw ownFailure(e, thrown);
    }
  }

  /** Runs the method; remembers what it threw, so that its own exception reaches the caller. */
  private static Object proceed(MethodInvocation invocation, Throwable[] thrown) throws Exception {
    try {
      return invocation.proceed();
    } catch (Exception | Error e) {
      thrown[0] = e;
      throw e;
    } catch (Throwable t) {
      thrown[0] = t;
      throw new UndeclaredThrowableException(t);
    }
  }

  @SuppressWarnings("unchecked")
  private static CompletionStage<Object> stage(Object returned) {
    return returned == null
        ? CompletableFuture.completedFuture(null)
        : (CompletionStage<Object>) returned;
  }

  /** The method's own checked exception, not the guard's wrapper of it. */
  private static Throwable ownFailure(Throwable error, Throwable[] thrown) {
    if (error instanceof SendFailedException && error.getCause() != null) {
      Throwable cause = error.getCause();
      if (cause == thrown[0] || thrown[0] == null) {
        return cause;
      }
    }
    return error;
  }

  private static Throwable unwrap(Throwable error) {
    Throwable t = error;
    while (t instanceof java.util.concurrent.CompletionException && t.getCause() != null) {
      t = t.getCause();
    }
    return t;
  }
}
