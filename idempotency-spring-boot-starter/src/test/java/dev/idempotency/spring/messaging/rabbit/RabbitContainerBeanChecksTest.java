package dev.idempotency.spring.messaging.rabbit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.testservers.RabbitMqServer;
import org.aopalliance.intercept.MethodInterceptor;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.core.AcknowledgeMode;
import org.springframework.amqp.core.Declarables;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.core.MessageListener;
import org.springframework.amqp.core.QueueBuilder;
import org.springframework.amqp.rabbit.config.SimpleRabbitListenerContainerFactory;
import org.springframework.amqp.rabbit.connection.ConnectionFactory;
import org.springframework.amqp.rabbit.listener.SimpleMessageListenerContainer;
import org.springframework.amqp.rabbit.listener.adapter.MessageListenerAdapter;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.support.GenericApplicationContext;
import org.springframework.core.NestedExceptionUtils;

/**
 * The check of a RabbitMQ listener container that is a bean (fixrabbit4; probeZ's {@code
 * RabbitContainerBeanProbeTest}): the same as a registry's container before it starts. A guarded
 * listener's container bean with {@code MANUAL} acknowledgement or a transacted channel, or one
 * initialized without the starter's advice in its chain (the application called {@code
 * afterPropertiesSet()} in the {@code @Bean} method, or set the listener after the bean was
 * initialized), fails the start, naming the bean; container beans of unguarded listeners start,
 * their chains as the application set them. Each in its own application, on the shared
 * rabbitmq-server.
 */
class RabbitContainerBeanChecksTest {

  static final String QUEUE = "idem.bean-checks";

  public static class Guarded {
    @IdempotentListener(name = "bean-checks-guarded", key = "#event")
    public void onEvent(String event) {}
  }

  public static class Unguarded {
    public void onEvent(String event) {}
  }

  /** A guarded listener that is itself a {@code MessageListener}, keyed by a header. */
  public static class GuardedMessageListener implements MessageListener {
    @Override
    @IdempotentListener(name = "bean-checks-message-listener", header = "Idempotency-Key")
    public void onMessage(Message message) {}
  }

  /** An advice of the application's (logging, tracing, say). */
  static final MethodInterceptor MINE = invocation -> invocation.proceed();

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  static class App {
    @Bean
    Declarables beanChecksQueue() {
      return new Declarables(QueueBuilder.nonDurable(QUEUE).build());
    }

    @Bean
    Guarded guarded() {
      return new Guarded();
    }

    @Bean
    Unguarded unguarded() {
      return new Unguarded();
    }
  }

  static SimpleMessageListenerContainer container(ConnectionFactory connections, Object listener) {
    SimpleMessageListenerContainer container = new SimpleMessageListenerContainer(connections);
    container.setQueueNames(QUEUE);
    container.setReceiveTimeout(100L);
    container.setMessageListener(new MessageListenerAdapter(listener, "onEvent"));
    return container;
  }

  static class ManualContainer {
    @Bean
    SimpleMessageListenerContainer manualContainer(ConnectionFactory connections, Guarded guarded) {
      SimpleMessageListenerContainer container = container(connections, guarded);
      container.setAcknowledgeMode(AcknowledgeMode.MANUAL);
      return container;
    }
  }

  static class TransactedContainer {
    @Bean
    SimpleMessageListenerContainer transactedContainer(
        ConnectionFactory connections, Guarded guarded) {
      SimpleMessageListenerContainer container = container(connections, guarded);
      container.setChannelTransacted(true);
      return container;
    }
  }

  static class ManualMessageListenerContainer {
    @Bean
    GuardedMessageListener guardedMessageListener() {
      return new GuardedMessageListener();
    }

    @Bean
    SimpleMessageListenerContainer manualListenerContainer(
        ConnectionFactory connections, GuardedMessageListener listener) {
      SimpleMessageListenerContainer container = new SimpleMessageListenerContainer(connections);
      container.setQueueNames(QUEUE);
      container.setAcknowledgeMode(AcknowledgeMode.MANUAL);
      container.setMessageListener(listener);
      return container;
    }
  }

  /** probeZ's low suspicion: the container initialized in its {@code @Bean} method. */
  static class InitializedContainer {
    @Bean
    SimpleMessageListenerContainer initializedContainer(
        ConnectionFactory connections, Guarded guarded) {
      SimpleMessageListenerContainer container = container(connections, guarded);
      container.setAdviceChain(MINE);
      container.afterPropertiesSet();
      return container;
    }
  }

  /** No container bean at the start. */
  static class NoContainers {}

  /** The guarded listener set on the container after the bean was initialized. */
  static class LateListenerContainer {
    @Bean
    SimpleMessageListenerContainer lateListenerContainer(ConnectionFactory connections) {
      SimpleMessageListenerContainer container = new SimpleMessageListenerContainer(connections);
      container.setQueueNames(QUEUE);
      container.setReceiveTimeout(100L);
      return container;
    }

    @Bean
    SmartInitializingSingleton setsTheListener(
        @Qualifier("lateListenerContainer") SimpleMessageListenerContainer container,
        Guarded guarded) {
      return () -> container.setMessageListener(new MessageListenerAdapter(guarded, "onEvent"));
    }
  }

  /** Unguarded: everything the starter refuses for a guarded listener, and the app's chains. */
  static class UnguardedContainers {
    @Bean
    SimpleMessageListenerContainer unguardedManualContainer(
        ConnectionFactory connections, Unguarded unguarded) {
      SimpleMessageListenerContainer container = container(connections, unguarded);
      container.setAcknowledgeMode(AcknowledgeMode.MANUAL);
      container.setDefaultRequeueRejected(false);
      container.setAdviceChain(MINE);
      container.afterPropertiesSet();
      return container;
    }

    @Bean
    SimpleMessageListenerContainer unguardedFactoryContainer(
        @Qualifier("rabbitListenerContainerFactory") SimpleRabbitListenerContainerFactory factory,
        Unguarded unguarded) {
      SimpleMessageListenerContainer container = factory.createListenerContainer();
      container.setQueueNames(QUEUE);
      container.setReceiveTimeout(100L);
      container.setMessageListener(new MessageListenerAdapter(unguarded, "onEvent"));
      container.setAdviceChain(MINE);
      return container;
    }

    @Bean
    SimpleMessageListenerContainer unguardedPlainContainer(
        ConnectionFactory connections, Unguarded unguarded) {
      SimpleMessageListenerContainer container = container(connections, unguarded);
      container.setDefaultRequeueRejected(false);
      return container;
    }
  }

  private static ConfigurableApplicationContext start(Class<?> containers) {
    return new SpringApplicationBuilder(App.class, containers)
        .web(WebApplicationType.NONE)
        .properties(
            "spring.rabbitmq.host=127.0.0.1",
            "spring.rabbitmq.port=" + RabbitMqServer.shared().port(),
            "idempotency.store=memory",
            "spring.main.banner-mode=off")
        .run();
  }

  private static void assertRefused(Class<?> containers, String... messageParts) {
    assertThatThrownBy(() -> start(containers).close()) // closed if it started after all
        .satisfies(
            failure ->
                assertThat(NestedExceptionUtils.getMostSpecificCause(failure))
                    .hasMessageContainingAll(messageParts));
  }

  @Test
  void aGuardedListenersContainerBeanWithManualAcknowledgementFailsTheStart() {
    assertRefused(
        ManualContainer.class,
        "@IdempotentListener on " + Guarded.class.getName() + ".onEvent(..)",
        "RabbitMQ listener container bean 'manualContainer'",
        "MANUAL acknowledgement, which is not supported",
        "Use AUTO acknowledgement");
  }

  @Test
  void aGuardedListenersContainerBeanWithATransactedChannelFailsTheStart() {
    assertRefused(
        TransactedContainer.class,
        "@IdempotentListener on " + Guarded.class.getName() + ".onEvent(..)",
        "RabbitMQ listener container bean 'transactedContainer'",
        "transacted channel",
        "not supported");
  }

  @Test
  void aGuardedMessageListenerIsRecognisedOnAContainerBean() {
    assertRefused(
        ManualMessageListenerContainer.class,
        "@IdempotentListener on " + GuardedMessageListener.class.getName() + ".onMessage(..)",
        "RabbitMQ listener container bean 'manualListenerContainer'",
        "MANUAL acknowledgement, which is not supported");
  }

  /**
   * probeZ's low suspicion: the application initializes its container in the {@code @Bean} method
   * ({@code afterPropertiesSet()}), so the container has built its advice proxy from the
   * application's chain before the starter could compose it; the starter's advice put in the chain
   * afterwards would never run. The check reads the chain the container runs, and refuses it.
   */
  @Test
  void aGuardedListenersContainerBeanInitializedInItsBeanMethodFailsTheStart() {
    assertRefused(
        InitializedContainer.class,
        "@IdempotentListener on " + Guarded.class.getName() + ".onEvent(..)",
        "RabbitMQ listener container bean 'initializedContainer'",
        "initialized without the idempotency starter's advice",
        "do not call afterPropertiesSet()");
  }

  /**
   * A container bean registered and created after the start is checked as it is created. (A
   * {@code @Lazy} container bean is not one: Spring's lifecycle processor creates every {@code
   * SmartLifecycle} bean at the start.)
   */
  @Test
  void aGuardedListenersContainerBeanCreatedAfterTheStartIsRefusedAsItIsCreated() {
    try (ConfigurableApplicationContext started = start(NoContainers.class)) {
      GenericApplicationContext context = (GenericApplicationContext) started;
      ConnectionFactory connections = context.getBean(ConnectionFactory.class);
      Guarded guarded = context.getBean(Guarded.class);
      context.registerBean(
          "lateManualContainer",
          SimpleMessageListenerContainer.class,
          () -> {
            SimpleMessageListenerContainer container = container(connections, guarded);
            container.setAutoStartup(false);
            container.setAcknowledgeMode(AcknowledgeMode.MANUAL);
            return container;
          });
      assertThatThrownBy(() -> context.getBean("lateManualContainer"))
          .satisfies(
              failure ->
                  assertThat(NestedExceptionUtils.getMostSpecificCause(failure))
                      .hasMessageContainingAll(
                          "@IdempotentListener on " + Guarded.class.getName() + ".onEvent(..)",
                          "RabbitMQ listener container bean 'lateManualContainer'",
                          "MANUAL acknowledgement, which is not supported"));
    }
  }

  /** The listener is set after the bean was initialized: the check before the start refuses it. */
  @Test
  void aGuardedListenerSetOnAContainerBeanAfterItWasInitializedFailsTheStart() {
    assertRefused(
        LateListenerContainer.class,
        "@IdempotentListener on " + Guarded.class.getName() + ".onEvent(..)",
        "RabbitMQ listener container bean 'lateListenerContainer'",
        "set the message listener in the container's @Bean method");
  }

  @Test
  void unguardedListenersContainerBeansStartAsTheApplicationSetThem() {
    try (ConfigurableApplicationContext started = start(UnguardedContainers.class)) {
      assertThat(started.isRunning()).isTrue();
      for (String name : new String[] {"unguardedManualContainer", "unguardedFactoryContainer"}) {
        SimpleMessageListenerContainer container =
            started.getBean(name, SimpleMessageListenerContainer.class);
        assertThat(container.isRunning()).as("%s running", name).isTrue();
        assertThat(adviceChain(container)).as("%s's advice chain", name).containsExactly(MINE);
      }
      SimpleMessageListenerContainer plain =
          started.getBean("unguardedPlainContainer", SimpleMessageListenerContainer.class);
      assertThat(plain.isRunning()).as("the plain container running").isTrue();
      assertThat(adviceChain(plain)).as("the plain container's advice chain").isEmpty();
    }
  }

  /** A container's advice chain (Spring AMQP 3.2 has no public getter). */
  private static Object[] adviceChain(SimpleMessageListenerContainer container) {
    java.lang.reflect.Field field =
        org.springframework.util.ReflectionUtils.findField(container.getClass(), "adviceChain");
    org.springframework.util.ReflectionUtils.makeAccessible(field);
    Object chain = org.springframework.util.ReflectionUtils.getField(field, container);
    return chain == null ? new Object[0] : (Object[]) chain;
  }
}
