package dev.idempotency.spring.messaging;

import org.jspecify.annotations.Nullable;
import org.springframework.beans.BeansException;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;
import org.springframework.context.SmartLifecycle;

/**
 * Where the starter installs each broker's part of {@link IdempotentListener}: on the listener
 * container factories (Spring AMQP's advice chain, Spring Kafka's interceptors), as they are
 * created, and on the listener containers themselves (Spring Kafka's error handler and transaction
 * manager, the JMS listener, the refusal of unsupported RabbitMQ containers): as each factory
 * creates one ({@link CreatedContainers}, so containers registered after the start get them too),
 * and again, to the same effect, over the registries' containers (and RabbitMQ's container beans)
 * before they start. Created by the auto-configuration.
 */
public final class ListenerContainerHooks {

  private ListenerContainerHooks() {}

  /**
   * Adds the Kafka interceptor to every Spring Kafka listener container factory, and the container
   * hooks of {@link #kafkaContainers} to every container it creates, also after the start, after
   * the application's {@code ContainerCustomizer} (the interceptor again, if it replaced it); and
   * to every {@code ProducerFactory} the post-processor that counts its producers' sends ({@link
   * KafkaTransactionSends}).
   *
   * @param backOff the retry backoff of deferred deliveries
   * @return the post-processor
   */
  public static BeanPostProcessor kafkaContainerFactories(DeliveryBackOff backOff) {
    return new BeanPostProcessor() {
      @Override
      @SuppressWarnings({"unchecked", "rawtypes"})
      public Object postProcessAfterInitialization(Object bean, String beanName)
          throws BeansException {
        if (bean
            instanceof
            org.springframework.kafka.config.AbstractKafkaListenerContainerFactory factory) {
          KafkaDeliveries.Interceptor<?, ?> ours = new KafkaDeliveries.Interceptor<>();
          KafkaDeliveries.includeInterceptor(factory, ours);
          return CreatedContainers.observe(
              factory,
              endpoint -> kafkaEndpoint(endpoint, factory),
              container -> kafkaContainer(container, ours, backOff));
        }
        if (bean instanceof org.springframework.kafka.core.ProducerFactory<?, ?> producers) {
          // before any producer is created: whether a listener produced in its container's
          // transaction is counted on them (KafkaTransactionSends)
          KafkaTransactionSends.observe(producers);
        }
        return bean;
      }
    };
  }

  /**
   * A factory's or container's interceptor or advice chain: its public getter where it has one
   * (Spring Kafka 4.0's), else its field (Spring Kafka 3.3 and Spring AMQP have only the setter
   * public; their code no longer changes).
   */
  static @Nullable Object current(Object factory, String getter, String field) {
    java.lang.reflect.Method method =
        org.springframework.util.ReflectionUtils.findMethod(factory.getClass(), getter);
    if (method != null && java.lang.reflect.Modifier.isPublic(method.getModifiers())) {
      return org.springframework.util.ReflectionUtils.invokeMethod(method, factory);
    }
    java.lang.reflect.Field declared =
        org.springframework.util.ReflectionUtils.findField(factory.getClass(), field);
    if (declared == null) {
      throw new IllegalStateException(
          "cannot read the "
              + field
              + " of "
              + factory.getClass().getName()
              + "; please report this with your Spring Kafka or Spring AMQP version");
    }
    org.springframework.util.ReflectionUtils.makeAccessible(declared);
    return org.springframework.util.ReflectionUtils.getField(declared, factory);
  }

  /**
   * Puts the RabbitMQ advice first (and its deferral catcher last) in every Spring AMQP listener
   * container factory's advice chain and, after the application's {@code ContainerCustomizer}, in
   * the chain of each container it creates (also after the start) if the customizer replaced or
   * reordered it; wraps the application's error handlers of each endpoint ({@link
   * RabbitErrorHandlers}); and checks each container as {@link #rabbitContainers} does ({@code
   * rabbitContainer}).
   *
   * <p>A listener container that is a bean (one the application built with the factory's {@code
   * createListenerContainer()}, which the starter does not see, or with {@code new
   * SimpleMessageListenerContainer(..)}) whose message listener is guarded gets the same chain
   * before Spring initializes it (the container reads its chain then): the starter's advice first,
   * the application's advices in their order, the starter's last part last, whatever chain the
   * application set. Its first part is bound to the container ({@link RabbitDeliveryAdvice#bindIn};
   * so is the factory's in the chain of a container bean whose listener is not guarded, which is
   * otherwise left as the application set it), so that a handler the application sets later is
   * wrapped when a deferral meets it. Once initialized, the bean is checked ({@code
   * rabbitContainer}): a guarded listener's container bean that was initialized without the chain
   * (its listener set, or the container initialized, before) or with a setting the starter does not
   * support is refused, and its creation fails naming it.
   *
   * @param backOff the pause before a deferred delivery is requeued
   * @return the post-processor
   */
  public static BeanPostProcessor rabbitContainerFactories(DeliveryBackOff backOff) {
    RabbitDeliveryAdvice beans = new RabbitDeliveryAdvice(backOff);
    return new BeanPostProcessor() {
      @Override
      public Object postProcessBeforeInitialization(Object bean, String beanName)
          throws BeansException {
        if (bean
            instanceof
            org.springframework.amqp.rabbit.listener.AbstractMessageListenerContainer container) {
          if (UnsupportedRabbitContainers.guardedMethod(container) != null) {
            beans.includeIn(container); // before it reads its chain; binds it
          } else {
            RabbitDeliveryAdvice.bindIn(container);
          }
        }
        return bean;
      }

      @Override
      public Object postProcessAfterInitialization(Object bean, String beanName)
          throws BeansException {
        if (bean
            instanceof
            org.springframework.amqp.rabbit.listener.AbstractMessageListenerContainer container) {
          rabbitContainer(container, beanName);
          return bean;
        }
        if (bean
            instanceof
            org.springframework.amqp.rabbit.config.BaseRabbitListenerContainerFactory<?> factory) {
          RabbitDeliveryAdvice ours = new RabbitDeliveryAdvice(backOff);
          org.aopalliance.aop.Advice[] withOurs = ours.firstIn(factory.getAdviceChain());
          if (withOurs != null) {
            factory.setAdviceChain(withOurs);
          }
          return CreatedContainers.observe(
              factory,
              ListenerContainerHooks::rabbitEndpoint,
              container -> {
                ours.includeIn(container);
                rabbitContainer(container, null);
              });
        }
        return bean;
      }
    };
  }

  /**
   * Wraps the error handler of every registered Spring Kafka listener container before it starts,
   * and composes its interceptors with the starter's if they lack it.
   *
   * @param registries the application's registry, if it has one
   * @param backOff the retry backoff of deferred deliveries
   * @return the lifecycle
   */
  public static SmartLifecycle kafkaContainers(
      ObjectProvider<org.springframework.kafka.config.KafkaListenerEndpointRegistry> registries,
      DeliveryBackOff backOff) {
    return new BeforeContainersStart(
        () ->
            registries
                .orderedStream()
                .flatMap(registry -> registry.getListenerContainers().stream())
                .forEach(
                    container ->
                        kafkaContainer(container, new KafkaDeliveries.Interceptor<>(), backOff)));
  }

  /**
   * Refuses a Spring Kafka method endpoint whose bean's guarded methods no advisor guards ({@link
   * UnguardedEndpointBeans}), registers its methods as listener methods, and refuses an {@link
   * IdempotentListener} that the endpoint or its factory makes a batch listener while it takes no
   * {@code List} ({@link BatchParameters#checkBatchListener}).
   */
  private static void kafkaEndpoint(
      Object endpoint,
      org.springframework.kafka.config.AbstractKafkaListenerContainerFactory<?, ?, ?> factory) {
    if (endpoint
        instanceof org.springframework.kafka.config.MultiMethodKafkaListenerEndpoint<?, ?> multi) {
      if (multi.getMethods() != null) {
        multi
            .getMethods()
            .forEach(method -> ListenerEndpointMethods.register(multi.getBean(), method));
      }
      ListenerEndpointMethods.register(multi.getBean(), multi.getDefaultMethod());
    }
    if (endpoint
        instanceof org.springframework.kafka.config.MethodKafkaListenerEndpoint<?, ?> method) {
      UnguardedEndpointBeans.refuse(method.getBean());
      ListenerEndpointMethods.register(method.getBean(), method.getMethod());
      Boolean batch = method.getBatchListener();
      if (batch == null) {
        batch = factory.isBatchListener();
      }
      if (Boolean.TRUE.equals(batch) && method.getMethod() != null) {
        BatchParameters.checkBatchListener(method.getMethod());
      }
    }
  }

  /**
   * Refuses a JMS method endpoint whose bean's guarded methods no advisor guards ({@link
   * UnguardedEndpointBeans}) and registers its method as a listener method.
   */
  private static void jmsEndpoint(Object endpoint) {
    if (endpoint instanceof org.springframework.jms.config.MethodJmsListenerEndpoint method) {
      UnguardedEndpointBeans.refuse(method.getBean());
      ListenerEndpointMethods.register(method.getBean(), method.getMostSpecificMethod());
    }
  }

  /**
   * Refuses a Spring AMQP method endpoint whose bean's guarded methods no advisor guards ({@link
   * UnguardedEndpointBeans}), registers its method as a listener method, and wraps its {@code
   * RabbitListenerErrorHandler} so that a deferral passes it ({@link RabbitErrorHandlers}). Spring
   * AMQP does not expose the handler methods of a multi-method endpoint: they count as listener
   * methods by their {@code @RabbitHandler} annotation.
   */
  private static void rabbitEndpoint(Object endpoint) {
    if (endpoint
        instanceof org.springframework.amqp.rabbit.listener.MethodRabbitListenerEndpoint method) {
      UnguardedEndpointBeans.refuse(method.getBean());
      ListenerEndpointMethods.register(method.getBean(), method.getMethod());
      RabbitErrorHandlers.passDeferralsIn(method);
    }
  }

  /**
   * The Kafka hooks of one container, after the application's {@code ContainerCustomizer}: the
   * starter's interceptor composed with the container's, its message listener wrapped so that a
   * deferral kept for the delivery fails it ({@link KafkaKeptDeferrals}; a container with no
   * listener yet, built with {@code createContainer(..)}, gets an advice that Spring Kafka applies
   * to the listener the application sets: {@link KafkaKeptDeferralAdvice}), its error handler
   * wrapped; applying them twice changes nothing.
   */
  private static void kafkaContainer(
      Object container, KafkaDeliveries.Interceptor<?, ?> ours, DeliveryBackOff backOff) {
    if (container
        instanceof
        org.springframework.kafka.listener.AbstractMessageListenerContainer<?, ?> kafka) {
      KafkaDeliveries.includeInterceptor(kafka, ours);
      org.springframework.kafka.listener.ContainerProperties properties =
          kafka.getContainerProperties();
      if (properties.getMessageListener() == null || KafkaKeptDeferralAdvice.isIn(properties)) {
        // no listener yet (createContainer(..)): the one the application sets gets the advice
        KafkaKeptDeferralAdvice.includeIn(properties);
      } else {
        KafkaKeptDeferrals.wrapListenerOf(kafka);
      }
      kafka.setCommonErrorHandler(
          KafkaDeliveries.errorHandler(kafka.getCommonErrorHandler(), backOff));
      observeTransactions(kafka.getContainerProperties());
    }
  }

  /**
   * Wraps a Kafka container's transaction manager, if it has one, so that an outcome waits for the
   * container's commit ({@link ContainerTransactionManager}).
   */
  @SuppressWarnings({"deprecation", "unchecked", "rawtypes"})
  private static void observeTransactions(
      org.springframework.kafka.listener.ContainerProperties properties) {
    org.springframework.kafka.transaction.KafkaAwareTransactionManager kafkaAware =
        properties.getKafkaAwareTransactionManager();
    if (kafkaAware != null) {
      properties.setKafkaAwareTransactionManager(
          (org.springframework.kafka.transaction.KafkaAwareTransactionManager)
              ContainerTransactionManager.wrap(kafkaAware));
    }
    org.springframework.transaction.PlatformTransactionManager manager =
        properties.getTransactionManager();
    if (manager != null) {
      properties.setTransactionManager(ContainerTransactionManager.wrap(manager));
    }
  }

  /**
   * Wraps the message listener of every registered JMS listener container before it starts.
   *
   * @param registries the application's registry, if it has one
   * @param backOff the delivery delay of deferred deliveries
   * @return the lifecycle
   */
  public static SmartLifecycle jmsContainers(
      ObjectProvider<org.springframework.jms.config.JmsListenerEndpointRegistry> registries,
      DeliveryBackOff backOff) {
    return new BeforeContainersStart(
        () ->
            registries
                .orderedStream()
                .flatMap(registry -> registry.getListenerContainers().stream())
                .forEach(container -> jmsContainer(container, backOff)));
  }

  /**
   * Applies the hooks of {@link #jmsContainers} to every container a JMS listener container factory
   * creates, also after the start (the listener of a {@code @Lazy} bean).
   *
   * @param backOff the delivery delay of deferred deliveries
   * @return the post-processor
   */
  public static BeanPostProcessor jmsContainerFactories(DeliveryBackOff backOff) {
    return new BeanPostProcessor() {
      @Override
      public Object postProcessAfterInitialization(Object bean, String beanName)
          throws BeansException {
        return bean instanceof org.springframework.jms.config.AbstractJmsListenerContainerFactory
            ? CreatedContainers.observe(
                bean,
                ListenerContainerHooks::jmsEndpoint,
                container -> jmsContainer(container, backOff))
            : bean;
      }
    };
  }

  /** The JMS hooks of one container; applying them twice changes nothing. */
  private static void jmsContainer(Object container, DeliveryBackOff backOff) {
    if (container instanceof org.springframework.jms.listener.AbstractMessageListenerContainer jms
        && jms.getMessageListener() != null
        && !(jms.getMessageListener() instanceof JmsDeliveryListener)) {
      jms.setupMessageListener(new JmsDeliveryListener(jms.getMessageListener(), backOff));
    }
  }

  /**
   * Checks, before any starts, every Spring AMQP listener container of the registries and every one
   * that is a bean (created by then: one created later is checked as it is created, {@link
   * #rabbitContainerFactories}), in case the application changed it after it was created ({@code
   * rabbitContainer}).
   *
   * @param registries the application's registry, if it has one
   * @param beanFactory the application's bean factory, for the container beans
   * @return the lifecycle
   */
  public static SmartLifecycle rabbitContainers(
      ObjectProvider<org.springframework.amqp.rabbit.listener.RabbitListenerEndpointRegistry>
          registries,
      BeanFactory beanFactory) {
    return new BeforeContainersStart(
        () -> {
          registries
              .orderedStream()
              .flatMap(registry -> registry.getListenerContainers().stream())
              .forEach(container -> rabbitContainer(container, null));
          if (beanFactory instanceof ConfigurableListableBeanFactory beans) {
            for (String name :
                beans.getBeanNamesForType(
                    org.springframework.amqp.rabbit.listener.AbstractMessageListenerContainer.class,
                    false,
                    false)) {
              Object container = beans.getSingleton(name); // not one not created yet (@Lazy)
              if (container != null) {
                rabbitContainer(container, name);
              }
            }
          }
        });
  }

  /**
   * The one check of a Spring AMQP listener container before it starts, a registry's or a bean:
   * refuses it if its listener is an {@link IdempotentListener} or an {@link
   * dev.idempotency.spring.Idempotent} method and the starter cannot support it safely, an advice
   * chain without the starter's advice first and its last part last ({@link
   * UnsupportedRabbitContainers#requireAdvice}), {@code MANUAL} acknowledgement, a transacted
   * channel or {@code returnExceptions = true} ({@link UnsupportedRabbitContainers#refuse}); and
   * wraps its error handler, again in case the application replaced it ({@link
   * RabbitErrorHandlers}); marks the parts of a producer's batch, and refuses a header-keyed batch
   * listener fed by producer batches ({@link RabbitProducerBatches}). Applying it twice changes
   * nothing.
   *
   * @param beanName the container's bean name, or {@code null} if it is not a bean
   */
  private static void rabbitContainer(Object container, @Nullable String beanName) {
    UnsupportedRabbitContainers.requireAdvice(container, beanName);
    RabbitErrorHandlers.passDeferralsOf(container);
    UnsupportedRabbitContainers.refuse(container, beanName);
    RabbitProducerBatches.refuseHeaderKeys(container);
  }

  /**
   * Runs once, at a lifecycle phase before the listener containers' (Spring Kafka's and JMS's
   * registries start theirs at {@code Integer.MAX_VALUE - 100} and later).
   */
  private static final class BeforeContainersStart implements SmartLifecycle {

    private final Runnable hook;
    private volatile boolean running;
    private boolean done;

    BeforeContainersStart(Runnable hook) {
      this.hook = hook;
    }

    @Override
    public synchronized void start() {
      if (!done) {
        hook.run();
        done = true;
      }
      running = true;
    }

    @Override
    public void stop() {
      running = false;
    }

    @Override
    public boolean isRunning() {
      return running;
    }

    @Override
    public int getPhase() {
      return Integer.MAX_VALUE - 1000;
    }
  }
}
