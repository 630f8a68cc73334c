package dev.idempotency.spring;

import dev.idempotency.spring.messaging.PickedHandlers;
import org.aopalliance.intercept.MethodInterceptor;
import org.aopalliance.intercept.MethodInvocation;
import org.jspecify.annotations.Nullable;

/**
 * Runs an {@link Idempotent} method through the guard: the key and the fingerprint from the
 * annotation's SpEL expressions, the rest by the {@link IdempotentInvoker}.
 */
final class IdempotentMethodInterceptor implements MethodInterceptor {

  private final IdempotentInvoker invoker;

  IdempotentMethodInterceptor(IdempotentInvoker invoker) {
    this.invoker = invoker;
  }

  @Override
  public @Nullable Object invoke(MethodInvocation invocation) throws Throwable {
    IdempotentMethod method = invoker.methodOf(invocation);
    if (method == null) {
      return invocation.proceed();
    }
    // a check the messaging hooks bound for the listener method picked for a delivery
    PickedHandlers.check(method.method, method.userClass);
    if (method.kind == IdempotentMethod.Kind.MONO) {
      try {
        return guarded(method, invocation);
      } catch (RuntimeException refused) {
        // a key or fingerprint refused before anything ran is the Mono's error, not a throw from
        // the call that builds it: an application handles a Mono's errors on the Mono
        return MonoCalls.refused(refused);
      }
    }
    return guarded(method, invocation);
  }

  private @Nullable Object guarded(IdempotentMethod method, MethodInvocation invocation)
      throws Throwable {
    String key = method.keyValue(invocation.getThis(), invocation.getArguments());
    return invoker.invoke(invocation, key, invoker.fingerprintOf(method, invocation));
  }
}
