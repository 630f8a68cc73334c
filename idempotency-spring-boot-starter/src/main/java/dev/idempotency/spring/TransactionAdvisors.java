package dev.idempotency.spring;

import org.aopalliance.aop.Advice;
import org.springframework.aop.Advisor;
import org.springframework.beans.factory.ListableBeanFactory;
import org.springframework.core.Ordered;

/**
 * The startup check that a guard's advisor runs outside Spring's transaction advisor, shared by
 * {@link Idempotent} and {@code @IdempotentListener}: an application that orders
 * {@code @Transactional} before the guard ({@code @EnableTransactionManagement(order = ...)} lower
 * than the guard's) would have outcomes recorded before a commit that fails. For the starter's
 * integrations; stateless.
 */
public final class TransactionAdvisors {

  private TransactionAdvisors() {}

  /**
   * Refuses a transaction advisor whose order is not higher than the guard's.
   *
   * @param beanFactory the application's beans
   * @param guardOrder the guard's advisor's order
   * @param annotation the guard's annotation, for the message ({@code "@Idempotent"})
   * @throws IllegalStateException naming both orders and how to fix it
   */
  public static void requireOutside(
      ListableBeanFactory beanFactory, int guardOrder, String annotation) {
    for (Advisor advisor : beanFactory.getBeansOfType(Advisor.class, true, false).values()) {
      int order =
          advisor instanceof Ordered ordered ? ordered.getOrder() : Ordered.LOWEST_PRECEDENCE;
      if (isTransactional(advisor.getAdvice()) && order <= guardOrder) {
        throw new IdempotencyConfigurationException(
            "Spring's transaction advisor has order "
                + order
                + ", so @Transactional would run outside "
                + annotation
                + " (order "
                + guardOrder
                + ") and an outcome could be recorded before a commit that fails.",
            "Set the transaction order higher than the guard's (the default,"
                + " @EnableTransactionManagement(order = Ordered.LOWEST_PRECEDENCE), is).");
      }
    }
  }

  /** Spring's transaction interceptor, known by name: spring-tx is the application's choice. */
  private static boolean isTransactional(Advice advice) {
    for (Class<?> type = advice.getClass(); type != null; type = type.getSuperclass()) {
      if (type.getName()
          .equals("org.springframework.transaction.interceptor.TransactionAspectSupport")) {
        return true;
      }
    }
    return false;
  }
}
