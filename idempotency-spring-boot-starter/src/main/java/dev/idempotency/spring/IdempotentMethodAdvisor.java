package dev.idempotency.spring;

import dev.idempotency.IdempotencyGuard;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.Objects;
import java.util.function.Supplier;
import org.aopalliance.aop.Advice;
import org.springframework.aop.Pointcut;
import org.springframework.aop.support.AbstractPointcutAdvisor;
import org.springframework.aop.support.StaticMethodMatcherPointcut;

/**
 * The Spring AOP advisor behind {@link Idempotent}: a pointcut that matches annotated methods
 * (checking each annotation when its bean is proxied, so that a wrong key expression fails the
 * application at startup), and the interceptor that runs them through the guard. The Spring Boot
 * auto-configuration registers it; register it yourself, as an infrastructure bean with an
 * auto-proxy creator, to use it without Boot.
 *
 * <p>Its dependencies are resolved on first use, so that creating it early, as advisors are, does
 * not create the guard, its store and its data source early too.
 */
public final class IdempotentMethodAdvisor extends AbstractPointcutAdvisor {

  private static final long serialVersionUID = 1L;

  private final transient IdempotentMethods methods = new IdempotentMethods();
  private final transient IdempotentMethodInterceptor interceptor;
  private final transient Pointcut pointcut =
      new StaticMethodMatcherPointcut() {
        @Override
        public boolean matches(Method method, Class<?> targetClass) {
          return methods.find(method, targetClass) != null;
        }
      };

  /**
   * Creates the advisor.
   *
   * @param guard the guard, looked up on the first call
   * @param json the JSON codecs for results, looked up on the first call
   * @param defaultTtl the window of methods that name none
   */
  public IdempotentMethodAdvisor(
      Supplier<IdempotencyGuard> guard, Supplier<JsonCodecs> json, Supplier<Duration> defaultTtl) {
    this.interceptor =
        new IdempotentMethodInterceptor(
            methods,
            Objects.requireNonNull(guard, "guard must not be null"),
            Objects.requireNonNull(json, "json must not be null"),
            Objects.requireNonNull(defaultTtl, "defaultTtl must not be null"));
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
