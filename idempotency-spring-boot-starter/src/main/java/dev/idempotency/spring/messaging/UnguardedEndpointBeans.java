package dev.idempotency.spring.messaging;

import dev.idempotency.spring.DefaultOperationNames;
import dev.idempotency.spring.IdempotencyConfigurationException;
import dev.idempotency.spring.Idempotent;
import dev.idempotency.spring.IdempotentMethodAdvisor;
import java.lang.annotation.Annotation;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.aop.Advisor;
import org.springframework.aop.framework.Advised;
import org.springframework.aop.framework.AopProxyUtils;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.util.ClassUtils;
import org.springframework.util.ReflectionUtils;

/**
 * Refuses a listener endpoint whose bean has an {@link IdempotentListener} or {@link Idempotent}
 * method that no advisor of the starter guards, as a container factory the starter observes creates
 * its container ({@link CreatedContainers}): before the container, or the registry that asked for
 * it, starts. Used by {@link ListenerContainerHooks}.
 *
 * <p>The bean of such an endpoint is unguarded only when its context has no advisor: a plain child
 * context (a Spring Cloud named context) with {@code @EnableKafka}, {@code @EnableRabbit} or
 * {@code @EnableJms} whose listeners use the parent's container factory. The parent's starter
 * otherwise refuses that child only at its {@code ContextRefreshedEvent}, after the child's
 * registry started the container, whose first deliveries would already have run unguarded. Spring
 * applies no post-processor of a parent to a child's beans and the child asks its parent for
 * nothing else before it starts its lifecycle beans; building a container from the parent's factory
 * (in the child's {@code afterSingletonsInstantiated}) is the one call a parent sees in time.
 */
final class UnguardedEndpointBeans {

  private static final Logger log = LoggerFactory.getLogger(UnguardedEndpointBeans.class);

  private UnguardedEndpointBeans() {}

  /**
   * Fails if {@code bean} has a guarded-by-annotation method and is not advised by the starter's
   * advisor for that annotation.
   *
   * @param bean the endpoint's bean (a proxy, or the object itself), or null if it has none
   * @throws IllegalStateException naming the bean's class, the method and the fix
   */
  static void refuse(@Nullable Object bean) {
    if (bean == null) {
      return;
    }
    refuse(bean, IdempotentListener.class, IdempotentListenerAdvisor.class);
    refuse(bean, Idempotent.class, IdempotentMethodAdvisor.class);
  }

  private static void refuse(
      Object bean, Class<? extends Annotation> annotation, Class<? extends Advisor> advisor) {
    if (advisedBy(bean, advisor)) {
      return;
    }
    Class<?> userClass = ClassUtils.getUserClass(AopProxyUtils.ultimateTargetClass(bean));
    Method method = annotatedMethod(userClass, annotation);
    if (method != null) {
      throw new IdempotencyConfigurationException(
          "a listener container is being created for a bean of "
              + userClass.getName()
              + ", whose @"
              + annotation.getSimpleName()
              + " method "
              + DefaultOperationNames.describe(method, userClass)
              + " no advisor guards (the bean is in a context without the starter's"
              + " auto-configuration, such as a plain child context using its parent's container"
              + " factory): every delivery would run unguarded and every redelivery send again.",
          "Import the starter's auto-configuration into that context"
              + " (@ImportAutoConfiguration({IdempotencyAutoConfiguration.class,"
              + " IdempotencyMessagingAutoConfiguration.class})), or build it with"
              + " SpringApplicationBuilder.child(..), or move the bean into the parent context");
    }
  }

  /**
   * Whether the bean, or a proxy it wraps, carries the advisor. A proxy whose target is not fixed
   * (a scoped or lazy proxy) counts as advised: its target is another bean, proxied on its own. So
   * does a JDK dynamic proxy that is not Spring's (another post-processor's wrapper): what it
   * delegates to cannot be seen, and its class takes the annotations of the interfaces it
   * implements, so refusing it could refuse a guarded bean; the check at the context's refresh
   * still applies.
   */
  private static boolean advisedBy(Object bean, Class<? extends Advisor> advisor) {
    Object current = bean;
    while (current instanceof Advised advised) {
      for (Advisor each : advised.getAdvisors()) {
        if (advisor.isInstance(each)) {
          return true;
        }
      }
      if (!advised.getTargetSource().isStatic()) {
        return true;
      }
      try {
        current = advised.getTargetSource().getTarget();
      } catch (Exception unreadable) {
        return true; // cannot see: leave it to the check at the context's refresh
      }
    }
    if (current != null && Proxy.isProxyClass(current.getClass())) {
      log.debug(
          "A listener bean of {} is a JDK dynamic proxy that is not Spring's: its target cannot be"
              + " seen, so it is not refused here",
          current.getClass().getName());
      return true;
    }
    return false;
  }

  private static @Nullable Method annotatedMethod(
      Class<?> userClass, Class<? extends Annotation> annotation) {
    for (Method method :
        ReflectionUtils.getUniqueDeclaredMethods(
            userClass, ReflectionUtils.USER_DECLARED_METHODS)) {
      if (AnnotatedElementUtils.hasAnnotation(method, annotation)) {
        return method;
      }
    }
    return null;
  }
}
