package dev.idempotency.spring.messaging;

import java.lang.reflect.Modifier;
import java.util.function.Consumer;
import org.aopalliance.intercept.MethodInterceptor;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.aop.framework.Advised;
import org.springframework.aop.framework.ProxyFactory;
import org.springframework.aop.support.DefaultPointcutAdvisor;
import org.springframework.aop.support.NameMatchMethodPointcut;

/**
 * Applies the starter's container hooks to every listener container a factory creates, as it is
 * created and before its registry (or the application) starts it: so a container registered after
 * the application started (the listener of a {@code @Lazy} bean, an endpoint the application
 * registers itself) or built by hand from the factory gets them too. Used by {@link
 * ListenerContainerHooks}.
 *
 * <p>Every public method of a factory that builds a container is observed:
 *
 * <ul>
 *   <li>{@code createListenerContainer(endpoint)} of Spring Kafka, Spring JMS and Spring AMQP,
 *       which also sets up the endpoint's listener, its acknowledgement mode and the factory's
 *       properties; the registry starts the container only after it returned. The endpoint is
 *       handed to the endpoint hook first (it registers a method endpoint's method as a listener
 *       method, {@link ListenerEndpointMethods});
 *   <li>Spring Kafka's {@code createContainer(topics)}, {@code createContainer(pattern)} and {@code
 *       createContainer(topicPartitions)}, which build a container with the factory's properties
 *       and no listener, for the application to set one and start it.
 * </ul>
 *
 * Spring AMQP's {@code createListenerContainer()} builds a container with no listener either; it is
 * not observed: the hooks of a RabbitMQ container depend on its listener (whether it is guarded). A
 * container so built that is a bean gets them as a bean ({@link
 * ListenerContainerHooks#rabbitContainerFactories}). The hooks must be safe to apply twice: the
 * start-up hooks run over the same containers again.
 */
final class CreatedContainers {

  private static final Logger LOG = LoggerFactory.getLogger(CreatedContainers.class);
  private static final String CREATE = "createListenerContainer";
  private static final String CREATE_BY_HAND = "createContainer";

  private CreatedContainers() {}

  /**
   * The factory, advised so that {@code onCreated} sees each container it creates.
   *
   * @param factory a listener container factory bean
   * @param onEndpoint the hook for the endpoint a container is created for (never null)
   * @param onCreated the hooks for one container; what it throws fails the container's creation
   * @return a proxy of the factory's class, or the factory itself if it already was a proxy (then
   *     advised) or its class is final (then not advised, with a warning)
   */
  static Object observe(Object factory, Consumer<Object> onEndpoint, Consumer<Object> onCreated) {
    NameMatchMethodPointcut pointcut = new NameMatchMethodPointcut();
    pointcut.setMappedNames(CREATE, CREATE_BY_HAND);
    MethodInterceptor hooks =
        invocation -> {
          Object[] arguments = invocation.getArguments();
          if (arguments.length != 1) {
            return invocation.proceed();
          }
          if (CREATE.equals(invocation.getMethod().getName()) && arguments[0] != null) {
            onEndpoint.accept(arguments[0]);
          }
          Object container = invocation.proceed();
          if (container != null) {
            onCreated.accept(container);
          }
          return container;
        };
    DefaultPointcutAdvisor advisor = new DefaultPointcutAdvisor(pointcut, hooks);
    if (factory instanceof Advised advised && !advised.isFrozen()) {
      advised.addAdvisor(advisor);
      return factory;
    }
    if (Modifier.isFinal(factory.getClass().getModifiers())) {
      LOG.warn(
          "listener container factory {} is a final class, so it cannot be advised: containers"
              + " it creates after the application started (the listeners of @Lazy beans, endpoints"
              + " registered at runtime, containers built by hand) do not get the idempotency"
              + " starter's hooks; make the class non-final",
          factory.getClass().getName());
      return factory;
    }
    ProxyFactory proxy = new ProxyFactory(factory);
    proxy.setProxyTargetClass(true);
    proxy.addAdvisor(advisor);
    return proxy.getProxy(factory.getClass().getClassLoader());
  }
}
