package dev.idempotency.spring;

import dev.idempotency.spring.messaging.DeliveryDeferrals;
import dev.idempotency.spring.messaging.PickedHandlers;
import org.aopalliance.intercept.MethodInterceptor;
import org.aopalliance.intercept.MethodInvocation;
import org.jspecify.annotations.Nullable;

/**
 * Runs an {@link Idempotent} method through the guard: the key and the fingerprint from the
 * annotation's SpEL expressions, the rest by the {@link IdempotentInvoker}.
 *
 * <p>Called while a broker's hook has a delivery bound (the method is a listener method, or one a
 * listener calls), a deferral the call throws (the key in flight elsewhere, the store down: nothing
 * sent) is also kept for the delivery, per call (operation and key), and forgotten when a call of
 * the same operation and key returns or fails otherwise ({@link DeliveryDeferrals}): an
 * application's advice on the listener bean that drops it, or a listener that catches it, still has
 * the delivery deferred rather than acknowledged unsent.
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
    String fingerprint = invoker.fingerprintOf(method, invocation);
    Object result;
    try {
      result = invoker.invoke(invocation, key, fingerprint);
    } catch (Throwable failure) {
      // kept for the delivery's hook, past an application's advice that may drop it
      DeliveryDeferrals.failed(method.name, key, failure);
      throw failure;
    }
    DeliveryDeferrals.returned(method.name, key);
    return result;
  }
}
