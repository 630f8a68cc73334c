package dev.idempotency.spring.web;

import java.lang.reflect.Method;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.concurrent.atomic.AtomicLong;
import org.aopalliance.aop.Advice;
import org.aopalliance.intercept.MethodInterceptor;
import org.springframework.aop.Pointcut;
import org.springframework.aop.support.AbstractPointcutAdvisor;
import org.springframework.aop.support.annotation.AnnotationMatchingPointcut;
import org.springframework.core.Ordered;

/**
 * Sees a Spring WebFlux {@link IdempotentEndpoint} handler method invoked: an advice on the method
 * itself, so it runs after WebFlux resolved, bound and validated the arguments (a request refused
 * there never reaches it) and before the method's body, whatever the method returns. It is the
 * innermost advice ({@link Ordered#LOWEST_PRECEDENCE}), so that a call refused by method security
 * around it is not counted either. The Spring Boot auto-configuration registers it as an
 * infrastructure bean for reactive applications; {@link IdempotentEndpointWebFilter} asks it.
 *
 * <p><b>Why a count per method.</b> On Spring MVC the advice finds its request through {@code
 * RequestContextHolder}. WebFlux invokes the method inside its reactive pipeline, where neither the
 * exchange nor the Reactor {@code Context} can be reached from a plain call (a {@code void} or a
 * value-returning method has no {@code Mono} to read the context from), and it offers no hook of
 * its own at that point: {@code InvocableHandlerMethod} is not pluggable. So each annotated method
 * counts its invocations, and the filter compares the count before its request reaches WebFlux with
 * the count once its response is known: unchanged means the handler method was certainly not
 * invoked for that request. A concurrent request to the same method can only make a refused request
 * look invoked, never the other way round, so the error is on the side of storing a refusal, never
 * on the side of running a send twice.
 *
 * <p>Thread-safe.
 */
public final class IdempotentEndpointInvocations extends AbstractPointcutAdvisor {

  private static final long serialVersionUID = 1L;

  private final transient Pointcut pointcut =
      new AnnotationMatchingPointcut(null, IdempotentEndpoint.class, true);

  private final transient ConcurrentMap<Method, AtomicLong> counts = new ConcurrentHashMap<>();

  private final transient MethodInterceptor advice =
      invocation -> {
        counter(invocation.getMethod()).incrementAndGet();
        return invocation.proceed();
      };

  /** Creates the advisor, innermost of the advisors on a handler method. */
  public IdempotentEndpointInvocations() {
    setOrder(Ordered.LOWEST_PRECEDENCE);
  }

  @Override
  public Pointcut getPointcut() {
    return pointcut;
  }

  @Override
  public Advice getAdvice() {
    return advice;
  }

  /** How often the handler method was invoked so far. */
  long count(Method method) {
    return counter(method).get();
  }

  private AtomicLong counter(Method method) {
    return counts.computeIfAbsent(method, m -> new AtomicLong());
  }
}
