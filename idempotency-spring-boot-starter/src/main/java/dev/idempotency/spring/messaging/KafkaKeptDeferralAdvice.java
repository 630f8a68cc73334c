package dev.idempotency.spring.messaging;

import java.util.Arrays;
import org.aopalliance.aop.Advice;
import org.aopalliance.intercept.MethodInterceptor;
import org.aopalliance.intercept.MethodInvocation;
import org.jspecify.annotations.Nullable;
import org.springframework.kafka.listener.ContainerProperties;
import org.springframework.kafka.listener.adapter.AsyncRepliesAware;

/**
 * {@link KafkaKeptDeferrals} for a Spring Kafka container that gets its message listener after the
 * starter's hooks ran: one built with a factory's {@code createContainer(..)}, which the
 * application gives its listener and starts. The container's properties advise every listener set
 * on them with their advice chain ({@code ContainerProperties.setAdviceChain}); this advice, first
 * in that chain, fails each delivery with the deferral the guard kept for it when the listener
 * returned, as the wrappers do. A listener with asynchronous replies is left as the wrappers leave
 * it.
 */
final class KafkaKeptDeferralAdvice implements MethodInterceptor {

  /**
   * One instance: on a listener that is already a proxy, Spring Kafka removes and adds the chain's
   * advices by identity, so a listener given to several containers gets it once.
   */
  private static final KafkaKeptDeferralAdvice INSTANCE = new KafkaKeptDeferralAdvice();

  private KafkaKeptDeferralAdvice() {}

  /** Whether the container's properties advise their listener with it. */
  static boolean isIn(ContainerProperties properties) {
    return Arrays.asList(properties.getAdviceChain()).contains(INSTANCE);
  }

  /**
   * Puts it first in the advice chain of the container's properties, before the application's
   * advices (so that one that drops failures does not drop the deferral); applying it twice changes
   * nothing.
   */
  static void includeIn(ContainerProperties properties) {
    if (isIn(properties)) {
      return;
    }
    Advice[] chain = properties.getAdviceChain();
    Advice[] withOurs = new Advice[chain.length + 1];
    withOurs[0] = INSTANCE;
    System.arraycopy(chain, 0, withOurs, 1, chain.length);
    properties.setAdviceChain(withOurs);
  }

  @Override
  public @Nullable Object invoke(MethodInvocation invocation) throws Throwable {
    if (!"onMessage".equals(invocation.getMethod().getName())
        || (invocation.getThis() instanceof AsyncRepliesAware async && async.isAsyncReplies())) {
      return invocation.proceed();
    }
    Delivery delivery = Delivery.current();
    Object result = invocation.proceed();
    KafkaKeptDeferrals.failIfDeferred(delivery, null);
    return result;
  }
}
