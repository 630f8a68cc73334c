package dev.idempotency.spring.messaging;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.spring.JsonCodecs;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.Objects;
import java.util.function.Function;
import java.util.function.Supplier;
import org.aopalliance.aop.Advice;
import org.jspecify.annotations.Nullable;
import org.springframework.aop.Pointcut;
import org.springframework.aop.support.AbstractPointcutAdvisor;
import org.springframework.aop.support.StaticMethodMatcherPointcut;

/**
 * The Spring AOP advisor behind {@link IdempotentListener}: a pointcut that matches annotated
 * methods (checking each annotation when its bean is proxied, so that a listener without a key
 * fails the application at startup), and the interceptor that runs deliveries through the guard.
 * The Spring Boot auto-configuration registers it, with each broker's hooks.
 *
 * <p>Its dependencies are resolved on first use, so that creating it early, as advisors are, does
 * not create the guard and its store early too.
 */
public final class IdempotentListenerAdvisor extends AbstractPointcutAdvisor {

  private static final long serialVersionUID = 1L;

  private final transient ListenerMethods methods;
  private final transient IdempotentListenerInterceptor interceptor;
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
   * Creates the advisor, with windows by operation.
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
    this.methods =
        new ListenerMethods(
            Objects.requireNonNull(defaultHeader, "defaultHeader must not be null"),
            Objects.requireNonNull(
                acknowledgeStoredFailure, "acknowledgeStoredFailure must not be null"));
    this.interceptor =
        new IdempotentListenerInterceptor(
            methods,
            Objects.requireNonNull(guard, "guard must not be null"),
            Objects.requireNonNull(json, "json must not be null"),
            Objects.requireNonNull(ttlOf, "ttlOf must not be null"));
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
