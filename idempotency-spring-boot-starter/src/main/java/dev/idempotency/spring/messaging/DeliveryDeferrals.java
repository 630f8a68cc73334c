package dev.idempotency.spring.messaging;

/**
 * Keeps the deferral of a {@link dev.idempotency.spring.Idempotent} method's call for the delivery
 * bound to this thread ({@link Delivery.KeptDeferral}), as {@link IdempotentListener}'s guard keeps
 * its own: an {@code @Idempotent} listener method, or another bean's {@code @Idempotent} method a
 * listener calls, whose deferral (the key in flight elsewhere, the store down: nothing sent) an
 * application's advice on the listener bean drops, or the listener catches, still has the delivery
 * deferred by the broker's hook rather than acknowledged unsent. A call is told by its operation
 * and key; its deferral is forgotten when a call of the same operation and key returns or fails
 * otherwise. Outside a delivery (no broker hook bound one: an HTTP request, a scheduled task) it
 * does nothing.
 *
 * <p>For the starter's integrations. Thread-safe: the delivery is the calling thread's.
 */
public final class DeliveryDeferrals {

  private DeliveryDeferrals() {}

  /**
   * Which call a deferral is kept for: distinct from an {@link IdempotentListener}'s, so that a
   * listener and an {@code @Idempotent} method sharing a name and a key never forget each other's.
   */
  private record MethodCall(String operation, String key) {}

  /**
   * The call of {@code operation} under {@code key} returned: forgets the deferral kept for it.
   *
   * @param operation the method's operation name
   * @param key the call's key within the operation
   */
  public static void returned(String operation, String key) {
    Delivery delivery = Delivery.current();
    if (delivery != null) {
      delivery.deferral().settle(new MethodCall(operation, key), null);
    }
  }

  /**
   * The call of {@code operation} under {@code key} threw {@code failure}: keeps it for the
   * delivery if it is a deferral ({@link DeferredDeliveryException#deferralIn}), forgets the
   * deferral kept for the call otherwise.
   *
   * @param operation the method's operation name
   * @param key the call's key within the operation
   * @param failure what the call threw, as its caller gets it
   */
  public static void failed(String operation, String key, Throwable failure) {
    Delivery delivery = Delivery.current();
    if (delivery != null) {
      delivery.deferral().settle(new MethodCall(operation, key), failure);
    }
  }
}
