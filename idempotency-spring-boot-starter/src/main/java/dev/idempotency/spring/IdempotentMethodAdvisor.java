package dev.idempotency.spring;

import dev.idempotency.IdempotencyGuard;
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
import org.springframework.beans.factory.BeanClassLoaderAware;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.BeanFactoryAware;
import org.springframework.beans.factory.ListableBeanFactory;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.core.Ordered;

/**
 * The Spring AOP advisor behind {@link Idempotent}: a pointcut that matches annotated methods
 * (checking each annotation when its bean is proxied, so that a wrong expression, a window not
 * longer than the lease, two methods with one default name or two beans of one class with a
 * default-named method fail the application at startup), and the interceptor that runs them through
 * the guard. The Spring Boot auto-configuration registers it; register it yourself, as an
 * infrastructure bean with an auto-proxy creator, to use it without Boot.
 *
 * <p><b>Order.</b> The advisor's order is {@link #DEFAULT_ORDER}, before Spring's transaction
 * advisor ({@link Ordered#LOWEST_PRECEDENCE} unless the application changes it): on a method that
 * is also {@code @Transactional}, the guard runs outside the transaction, so an outcome is recorded
 * only after the commit succeeded, and a failed commit releases the key. Method security
 * ({@code @PreAuthorize}) runs outside the guard, so a refused call claims nothing.
 *
 * <p>Its dependencies are resolved on first use, so that creating it early, as advisors are, does
 * not create the guard, its store and its data source early too.
 */
public final class IdempotentMethodAdvisor extends AbstractPointcutAdvisor
    implements SmartInitializingSingleton, BeanFactoryAware, BeanClassLoaderAware {

  private static final long serialVersionUID = 1L;

  /** The advisor's order: outside {@code @Transactional}, inside method security. */
  public static final int DEFAULT_ORDER = Ordered.LOWEST_PRECEDENCE - 100;

  /** How long a method returning a stage waits for the claim past the in-flight wait. */
  private static final Duration CLAIM_WAIT_MARGIN = Duration.ofMinutes(1);

  private final transient IdempotentMethods methods;
  private final transient IdempotentInvoker invoker;
  private final transient IdempotentMethodInterceptor interceptor;
  private final transient Pointcut pointcut =
      new StaticMethodMatcherPointcut() {
        @Override
        public boolean matches(Method method, Class<?> targetClass) {
          // read first: finding a method may create (and proxy) other beans
          String beanName = ProxyCreationContext.getCurrentProxiedBeanName();
          if (methods.find(method, targetClass) == null) {
            return false;
          }
          methods.registerBean(beanName, targetClass); // two beans of one class: refused
          return true;
        }
      };

  /**
   * Creates the advisor, with no check of windows against the lease at startup.
   *
   * @param guard the guard, looked up on the first call
   * @param json the JSON codecs for results, looked up on the first call
   * @param defaultTtl the window of methods that name none
   */
  public IdempotentMethodAdvisor(
      Supplier<IdempotencyGuard> guard, Supplier<JsonCodecs> json, Supplier<Duration> defaultTtl) {
    this(guard, json, defaultTtl, () -> null, () -> IdempotencyGuard.DEFAULT_IN_FLIGHT_WAIT);
  }

  /**
   * Creates the advisor.
   *
   * @param guard the guard, looked up on the first call
   * @param json the JSON codecs for results, looked up on the first call
   * @param defaultTtl the window of methods that name none, looked up when the first annotated
   *     method is found
   * @param lease the guard's lease, which every window must be longer than, looked up when the
   *     first annotated method is found; may supply null to skip the check
   * @param inFlightWait the guard's in-flight wait: a method returning a stage waits that long for
   *     its claim, and a minute more for a slow store
   */
  public IdempotentMethodAdvisor(
      Supplier<IdempotencyGuard> guard,
      Supplier<JsonCodecs> json,
      Supplier<Duration> defaultTtl,
      Supplier<@Nullable Duration> lease,
      Supplier<Duration> inFlightWait) {
    this(guard, json, TtlAttribute.sameForAll(defaultTtl), lease, inFlightWait);
  }

  /**
   * Creates the advisor, with windows by operation.
   *
   * @param guard the guard, looked up on the first call
   * @param json the JSON codecs for results, looked up on the first call
   * @param ttlOf the window of methods that name none, by operation name ({@code
   *     idempotency.operations.<name>.ttl}, else {@code idempotency.default-ttl}), looked up as
   *     annotated methods are found
   * @param lease the guard's lease, which every window must be longer than; may supply null to skip
   *     the check
   * @param inFlightWait the guard's in-flight wait
   */
  public IdempotentMethodAdvisor(
      Supplier<IdempotencyGuard> guard,
      Supplier<JsonCodecs> json,
      Function<@Nullable String, Duration> ttlOf,
      Supplier<@Nullable Duration> lease,
      Supplier<Duration> inFlightWait) {
    Objects.requireNonNull(guard, "guard must not be null");
    Objects.requireNonNull(json, "json must not be null");
    Objects.requireNonNull(inFlightWait, "inFlightWait must not be null");
    this.methods =
        new IdempotentMethods(
            Objects.requireNonNull(ttlOf, "ttlOf must not be null"),
            Objects.requireNonNull(lease, "lease must not be null"));
    this.invoker =
        new IdempotentInvoker(
            methods, guard, json, () -> inFlightWait.get().plus(CLAIM_WAIT_MARGIN));
    this.interceptor = new IdempotentMethodInterceptor(invoker);
    setOrder(DEFAULT_ORDER);
  }

  private transient @Nullable ListableBeanFactory beanFactory;
  private transient @Nullable ClassLoader beanClassLoader;

  @Override
  public void setBeanClassLoader(ClassLoader classLoader) {
    this.beanClassLoader = classLoader;
  }

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
   * Idempotent} method fail it, even where one is not created yet ({@code @Lazy}; {@link
   * DefaultOperationNames#registerBeanDefinitions}); if it has {@link Idempotent} methods, no
   * transaction advisor may run outside this one (an application that sets
   * {@code @EnableTransactionManagement(order = ...)} lower than {@link #DEFAULT_ORDER}), or an
   * outcome could be recorded before a commit that fails; and a method with {@link
   * Idempotent#joinTransaction()} needs spring-jdbc on the application's class path and a {@code
   * JdbcKeyStore} on a {@code DataSource}.
   *
   * @throws IllegalStateException naming both beans, both orders, or the joining method and the
   *     store
   */
  @Override
  public void afterSingletonsInstantiated() {
    if (beanFactory
        instanceof
        org.springframework.beans.factory.config.ConfigurableListableBeanFactory configurable) {
      // beans not created yet (@Lazy): two of one class with a default-named method fail the start
      DefaultOperationNames.registerBeanDefinitions(
          configurable, Idempotent.class, methods::registerBean);
    }
    if (beanFactory == null || !methods.anyFound()) {
      return;
    }
    invoker.requireJoinableStore(beanClassLoader);
    TransactionAdvisors.requireOutside(beanFactory, getOrder(), "@Idempotent");
  }

  @Override
  public Pointcut getPointcut() {
    return pointcut;
  }

  @Override
  public Advice getAdvice() {
    return interceptor;
  }

  /**
   * What runs a call of an {@link Idempotent} method through the guard once its key is known, for
   * integrations that take the key from elsewhere than the annotation (a message header).
   *
   * @return the invoker, shared with this advisor's interceptor
   */
  public IdempotentInvoker invoker() {
    return invoker;
  }
}
