package dev.idempotency.spring.autoconfigure;

import dev.idempotency.spring.DefaultOperationNames;
import dev.idempotency.spring.IdempotencyConfigurationException;
import dev.idempotency.spring.Idempotent;
import dev.idempotency.spring.IdempotentMethodAdvisor;
import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.IdempotentListenerAdvisor;
import java.lang.annotation.Annotation;
import java.lang.reflect.Method;
import org.jspecify.annotations.Nullable;
import org.springframework.beans.BeansException;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;
import org.springframework.context.ApplicationContext;
import org.springframework.context.ApplicationContextAware;
import org.springframework.context.ApplicationListener;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.event.ContextRefreshedEvent;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.util.ClassUtils;
import org.springframework.util.ReflectionUtils;

/**
 * Refuses a child context of the application (a Spring Cloud named context, a plain {@code
 * AnnotationConfigApplicationContext} given this one as parent) that has {@link Idempotent} or
 * {@link IdempotentListener} methods but no advisor of its own to guard them.
 *
 * <p>An advisor proxies only the beans of its own context, so such methods would run unguarded and
 * every repeat would send again, with nothing said: the one failure this library exists to prevent.
 * Spring leaves {@code @Transactional} without {@code @EnableTransactionManagement} silently
 * unapplied, but a missing transaction is visible in the data, while a duplicate notification is
 * seen only by its recipient; and the starter fails at startup for every other misconfiguration it
 * can see there (SPEC 13). So the child's start fails, naming the bean, the method and the fix. A
 * child's {@link ContextRefreshedEvent} is published to its ancestors too, which is where this
 * listens: a context with no starter anywhere in its hierarchy cannot be checked.
 */
final class UnguardedChildContexts
    implements ApplicationListener<ContextRefreshedEvent>, ApplicationContextAware {

  private static final String FIX =
      "Import the starter's auto-configuration into that context"
          + " (@ImportAutoConfiguration({IdempotencyAutoConfiguration.class,"
          + " IdempotencyMessagingAutoConfiguration.class}) on one of its configuration classes),"
          + " or build it with SpringApplicationBuilder.child(..), so that it has its own advisor"
          + " on the parent's guard; or move the bean into the parent context";

  private @Nullable ApplicationContext context;

  @Override
  public void setApplicationContext(ApplicationContext applicationContext) {
    this.context = applicationContext;
  }

  @Override
  public void onApplicationEvent(ContextRefreshedEvent event) {
    ApplicationContext refreshed = event.getApplicationContext();
    if (refreshed == context
        || !descendsFrom(refreshed)
        || !(refreshed instanceof ConfigurableApplicationContext child)) {
      return;
    }
    ConfigurableListableBeanFactory beans = child.getBeanFactory();
    refuseUnguarded(child, beans, Idempotent.class, IdempotentMethodAdvisor.class);
    refuseUnguarded(child, beans, IdempotentListener.class, IdempotentListenerAdvisor.class);
  }

  private boolean descendsFrom(ApplicationContext refreshed) {
    for (ApplicationContext parent = refreshed.getParent();
        parent != null;
        parent = parent.getParent()) {
      if (parent == context) {
        return true;
      }
    }
    return false;
  }

  /** Fails if the child has a bean with an {@code annotation} method and no local advisor. */
  private static void refuseUnguarded(
      ConfigurableApplicationContext child,
      ConfigurableListableBeanFactory beans,
      Class<? extends Annotation> annotation,
      Class<?> advisor) {
    if (beans.getBeanNamesForType(advisor, true, false).length > 0) {
      return; // the child guards its own beans (the parent's advisor is not counted here)
    }
    for (String name : beans.getBeanDefinitionNames()) {
      Class<?> type;
      try {
        type = beans.getType(name, false);
      } catch (BeansException | LinkageError unpredictable) {
        continue;
      }
      Method method =
          type == null ? null : annotatedMethod(ClassUtils.getUserClass(type), annotation);
      if (method != null) {
        throw new IdempotencyConfigurationException(
            "bean '"
                + name
                + "' of the child context '"
                + child.getId()
                + "' has the @"
                + annotation.getSimpleName()
                + " method "
                + DefaultOperationNames.describe(method, ClassUtils.getUserClass(type))
                + ", but that context has no advisor to guard it (its parent's guards only the"
                + " parent's beans): every call would run unguarded and every repeat send again.",
            FIX);
      }
    }
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
