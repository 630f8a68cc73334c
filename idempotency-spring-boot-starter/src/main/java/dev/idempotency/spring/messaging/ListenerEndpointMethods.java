package dev.idempotency.spring.messaging;

import java.lang.reflect.Method;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.jspecify.annotations.Nullable;
import org.springframework.aop.framework.AopProxyUtils;
import org.springframework.aop.support.AopUtils;

/**
 * The methods that listener containers were created for without a listener annotation: the method
 * of a Spring Kafka {@code MethodKafkaListenerEndpoint} (or JMS {@code MethodJmsListenerEndpoint},
 * Spring AMQP {@code MethodRabbitListenerEndpoint}) that the application registered itself, also
 * after the start ({@code KafkaListenerEndpointRegistry.registerListenerContainer(..)}). A
 * container factory the starter observes ({@link CreatedContainers}) registers the endpoint's
 * method here as it creates the container, before the container starts.
 *
 * <p>An {@link dev.idempotency.spring.Idempotent} method is a listener method, whose outcome waits
 * for the listener container's transaction ({@link OutcomesAfterCommit}), when it carries a
 * listener annotation or is registered here. An {@code @Idempotent} method merely called from a
 * listener is neither: it records when it returns, so that a redelivery after a failed commit
 * replays it instead of calling its provider again.
 *
 * <p>For the starter's integrations. Thread-safe; the methods are kept for the life of the JVM
 * (there are as many as the application's listener methods).
 */
public final class ListenerEndpointMethods {

  private static final Set<Method> METHODS = ConcurrentHashMap.newKeySet();

  private ListenerEndpointMethods() {}

  /**
   * Whether a container was created for an endpoint of this method.
   *
   * @param method the method as declared by the bean's own class (not a proxy's)
   * @return {@code true} if it is the method of a listener endpoint
   */
  public static boolean contains(Method method) {
    return !METHODS.isEmpty() && METHODS.contains(method);
  }

  /**
   * Registers the method of a listener endpoint, as declared by its bean's own class.
   *
   * @param bean the endpoint's bean (a proxy, or the object itself), or null if it has none
   * @param method the endpoint's method, or null if it has none
   */
  static void register(@Nullable Object bean, @Nullable Method method) {
    if (method == null) {
      return;
    }
    Class<?> target = bean == null ? method.getDeclaringClass() : targetClass(bean);
    METHODS.add(AopUtils.getMostSpecificMethod(method, target));
  }

  private static Class<?> targetClass(Object bean) {
    Class<?> target = AopProxyUtils.ultimateTargetClass(bean);
    return org.springframework.util.ClassUtils.getUserClass(target);
  }
}
