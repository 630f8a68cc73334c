package dev.idempotency.spring.messaging;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.spring.DefaultOperationNames;
import dev.idempotency.spring.IdempotentMethodAdvisor;
import dev.idempotency.spring.JsonCodecs;
import dev.idempotency.spring.TransactionAdvisors;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.Objects;
import java.util.function.Function;
import java.util.function.Supplier;
import org.aopalliance.aop.Advice;
import org.jspecify.annotations.Nullable;
import org.springframework.aop.Pointcut;
import org.springframework.aop.framework.autoproxy.ProxyCreationContext;
import org.springframework.aop.support.AbstractPointcutAdvisor;
import org.springframework.aop.support.StaticMethodMatcherPointcut;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.BeanFactoryAware;
import org.springframework.beans.factory.ListableBeanFactory;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.core.Ordered;

/**
 * The Spring AOP advisor behind {@link IdempotentListener}: a pointcut that matches annotated
 * methods (checking each annotation when its bean is proxied, so that a listener without a key
 * fails the application at startup), and the interceptor that runs deliveries through the guard.
 * The Spring Boot auto-configuration registers it, with each broker's hooks.
 *
 * <p><b>Order.</b> The advisor's order is {@link #DEFAULT_ORDER} ({@link
 * IdempotentMethodAdvisor#DEFAULT_ORDER}), before Spring's transaction advisor ({@link
 * Ordered#LOWEST_PRECEDENCE} unless the application changes it): on a listener that is also
 * {@code @Transactional}, the guard runs outside the transaction, so an outcome is recorded only
 * after the commit succeeded, and a failed commit releases the key. An application whose
 * transaction advisor would run outside this one fails at startup.
 *
 * <p>Its dependencies are resolved on first use, so that creating it early, as advisors are, does
 * not create the guard and its store early too.
 */
public final class IdempotentListenerAdvisor extends AbstractPointcutAdvisor
    implements SmartInitializingSingleton, BeanFactoryAware {

  private static final long serialVersionUID = 1L;

  /** The advisor's order: outside {@code @Transactional}, as {@code @Idempotent}'s. */
  public static final int DEFAULT_ORDER = IdempotentMethodAdvisor.DEFAULT_ORDER;

  private final transient ListenerMethods methods;
  private final transient IdempotentListenerInterceptor interceptor;
  private final transient Pointcut pointcut =
      new StaticMethodMatcherPointcut() {
        @Override
        public boolean matches(Method method, Class<?> targetClass) {
          // read first: finding a listener may create (and proxy) other beans
          String beanName = ProxyCreationContext.getCurrentProxiedBeanName();
          if (methods.find(method, targetClass) == null) {
            return false;
          }
          methods.registerBean(beanName, targetClass); // two beans of one class: refused
          return true;
        }
      };

  /**
   * Creates the advisor.
   *
   * @param guard the guard, looked up on the first delivery
   * @param json the JSON codecs, for listeners that return a value (looked up when needed)
   * @param defaultTtl the window of listeners that name none
   * @param defaultHeader the key's header for listeners that name neither key nor header
   * @param acknowledgeStoredFailure what {@link IdempotentListener.StoredFailure#DEFAULT} means
   */
  public IdempotentListenerAdvisor(
      Supplier<IdempotencyGuard> guard,
      Supplier<JsonCodecs> json,
      Supplier<Duration> defaultTtl,
      Supplier<String> defaultHeader,
      Supplier<Boolean> acknowledgeStoredFailure) {
    this(
        guard,
        json,
        dev.idempotency.spring.TtlAttribute.sameForAll(defaultTtl),
        defaultHeader,
        acknowledgeStoredFailure);
  }

  /**
   * Creates the advisor, with windows by operation and no check of windows against the lease.
   *
   * @param guard the guard, looked up on the first delivery
   * @param json the JSON codecs, for listeners that return a value (looked up when needed)
   * @param ttlOf the window of listeners that name none, by operation name ({@code
   *     idempotency.operations.<name>.ttl}, else {@code idempotency.default-ttl})
   * @param defaultHeader the key's header for listeners that name neither key nor header
   * @param acknowledgeStoredFailure what {@link IdempotentListener.StoredFailure#DEFAULT} means
   */
  public IdempotentListenerAdvisor(
      Supplier<IdempotencyGuard> guard,
      Supplier<JsonCodecs> json,
      Function<@Nullable String, Duration> ttlOf,
      Supplier<String> defaultHeader,
      Supplier<Boolean> acknowledgeStoredFailure) {
    this(guard, json, ttlOf, () -> null, defaultHeader, acknowledgeStoredFailure);
  }

  /**
   * Creates the advisor, with windows by operation, each checked against the lease as listeners are
   * found (at startup).
   *
   * @param guard the guard, looked up on the first delivery
   * @param json the JSON codecs, for listeners that return a value (looked up when needed)
   * @param ttlOf the window of listeners that name none, by operation name ({@code
   *     idempotency.operations.<name>.ttl}, else {@code idempotency.default-ttl}), looked up as
   *     listeners are found
   * @param lease the guard's lease, which every window must be longer than; may supply null to skip
   *     the check
   * @param defaultHeader the key's header for listeners that name neither key nor header
   * @param acknowledgeStoredFailure what {@link IdempotentListener.StoredFailure#DEFAULT} means
   */
  public IdempotentListenerAdvisor(
      Supplier<IdempotencyGuard> guard,
      Supplier<JsonCodecs> json,
      Function<@Nullable String, Duration> ttlOf,
      Supplier<@Nullable Duration> lease,
      Supplier<String> defaultHeader,
      Supplier<Boolean> acknowledgeStoredFailure) {
    this.methods =
        new ListenerMethods(
            Objects.requireNonNull(defaultHeader, "defaultHeader must not be null"),
            Objects.requireNonNull(
                acknowledgeStoredFailure, "acknowledgeStoredFailure must not be null"),
            Objects.requireNonNull(ttlOf, "ttlOf must not be null"),
            Objects.requireNonNull(lease, "lease must not be null"));
    this.interceptor =
        new IdempotentListenerInterceptor(
            methods,
            Objects.requireNonNull(guard, "guard must not be null"),
            Objects.requireNonNull(json, "json must not be null"));
    setOrder(DEFAULT_ORDER);
  }

  private transient @Nullable ListableBeanFactory beanFactory;

  @Override
  public void setBeanFactory(BeanFactory beanFactory) {
    this.beanFactory = beanFactory instanceof ListableBeanFactory listable ? listable : null;
    if (beanFactory
        instanceof
        org.springframework.beans.factory.config.ConfigurableListableBeanFactory configurable) {
      // one namespace registry for @Idempotent and @IdempotentListener methods
      methods.shareDefaultNames(DefaultOperationNames.sharedIn(configurable));
    }
  }

  /**
   * Once the application has started: two beans of one class with a default-named {@link
   * IdempotentListener} method fail it, even where one is not created yet ({@code @Lazy}; {@link
   * DefaultOperationNames#registerBeanDefinitions}); if it has {@link IdempotentListener} methods,
   * no transaction advisor may run outside this one, or an outcome could be recorded before a
   * commit that fails.
   *
   * @throws IllegalStateException naming both beans, or both orders
   */
  @Override
  public void afterSingletonsInstantiated() {
    if (beanFactory
        instanceof
        org.springframework.beans.factory.config.ConfigurableListableBeanFactory configurable) {
      DefaultOperationNames.registerBeanDefinitions(
          configurable, IdempotentListener.class, methods::registerBean);
    }
    if (beanFactory == null || !methods.anyFound()) {
      return;
    }
    TransactionAdvisors.requireOutside(beanFactory, getOrder(), "@IdempotentListener");
  }

  @Override
  public Pointcut getPointcut() {
    return pointcut;
  }

  @Override
  public Advice getAdvice() {
    return interceptor;
  }
}
