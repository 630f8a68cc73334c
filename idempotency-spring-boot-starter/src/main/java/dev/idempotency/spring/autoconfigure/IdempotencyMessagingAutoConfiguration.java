package dev.idempotency.spring.autoconfigure;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.spring.JsonCodecs;
import dev.idempotency.spring.messaging.IdempotentListenerAdvisor;
import dev.idempotency.spring.messaging.ListenerContainerHooks;
import org.springframework.aop.config.AopConfigUtils;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.config.BeanDefinition;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.beans.factory.support.BeanDefinitionRegistry;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.SearchStrategy;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.SmartLifecycle;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.context.annotation.ImportBeanDefinitionRegistrar;
import org.springframework.context.annotation.Role;
import org.springframework.core.env.Environment;
import org.springframework.core.type.AnnotationMetadata;

/**
 * Auto-configuration of {@link dev.idempotency.spring.messaging.IdempotentListener} message
 * listeners: the advisor, and each broker's hooks where its Spring integration is on the classpath
 * (Spring Kafka, Spring AMQP, Spring JMS). Every bean backs off when the application defines its
 * own of that name in the same context.
 *
 * <p>Every bean here is per context ({@link SearchStrategy#CURRENT}, as Spring Boot's own
 * post-processors are): an advisor or a bean post-processor acts only on the beans of the context
 * that holds it, so a child context (as {@code SpringApplicationBuilder.child} builds it) that
 * backed off because its parent had one would leave its listeners and container factories
 * unguarded. The guard it uses is looked up in the whole hierarchy, so a child shares its parent's.
 */
@AutoConfiguration(
    after = IdempotencyAutoConfiguration.class,
    afterName = {
      "org.springframework.boot.autoconfigure.kafka.KafkaAutoConfiguration",
      "org.springframework.boot.kafka.autoconfigure.KafkaAutoConfiguration",
      "org.springframework.boot.autoconfigure.amqp.RabbitAutoConfiguration",
      "org.springframework.boot.amqp.autoconfigure.RabbitAutoConfiguration",
      "org.springframework.boot.autoconfigure.jms.JmsAutoConfiguration",
      "org.springframework.boot.jms.autoconfigure.JmsAutoConfiguration"
    })
@ConditionalOnClass(IdempotencyGuard.class)
@ConditionalOnBean(IdempotencyGuard.class)
@EnableConfigurationProperties(IdempotencyMessagingProperties.class)
@Import(IdempotencyMessagingAutoConfiguration.AutoProxy.class)
public final class IdempotencyMessagingAutoConfiguration {

  /** Created by Spring Boot. */
  public IdempotencyMessagingAutoConfiguration() {}

  /**
   * The advisor of {@code @IdempotentListener} methods.
   *
   * @param guard the guard, looked up on the first delivery
   * @param json JSON codecs, for listeners that return a value
   * @param properties the guard's properties (the default window)
   * @param environment where {@code idempotency.messaging.*} is bound from
   * @param beanFactory the application's beans (whether the guard is the auto-configured one, whose
   *     lease every window must be longer than)
   * @return the advisor
   */
  @Bean
  @Role(BeanDefinition.ROLE_INFRASTRUCTURE)
  @ConditionalOnMissingBean(search = SearchStrategy.CURRENT) // per context, as every bean here
  public static IdempotentListenerAdvisor idempotentListenerAdvisor(
      org.springframework.beans.factory.config.ConfigurableListableBeanFactory beanFactory,
      ObjectProvider<IdempotencyGuard> guard,
      ObjectProvider<JsonCodecs> json,
      ObjectProvider<IdempotencyProperties> properties,
      Environment environment) {
    // bound from the environment, not the properties bean: listeners are worked out while beans
    // are being proxied, when creating another bean would be too early
    org.springframework.util.function.SingletonSupplier<IdempotencyMessagingProperties> messaging =
        org.springframework.util.function.SingletonSupplier.of(() -> messaging(environment));
    return new IdempotentListenerAdvisor(
        ClosestGuard.of(beanFactory, guard),
        () ->
            json.getIfAvailable(
                () -> {
                  throw new IllegalStateException(
                      "an @IdempotentListener method returns a value, but the application has no"
                          + " JSON mapper (Jackson) to store it with; add one or define a"
                          + " JsonCodecs bean");
                }),
        operation -> properties.getObject().ttlOf(operation),
        () -> IdempotencyAutoConfiguration.autoConfiguredLease(beanFactory, properties),
        () -> messaging.obtain().getHeader(),
        () ->
            messaging.obtain().getStoredFailure()
                == IdempotencyMessagingProperties.StoredFailure.ACKNOWLEDGE);
  }

  /** Spring Kafka: the interceptor on every container factory, the error handler per container. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass(name = "org.springframework.kafka.config.KafkaListenerEndpointRegistry")
  static class KafkaConfiguration {

    @Bean
    @Role(BeanDefinition.ROLE_INFRASTRUCTURE)
    @ConditionalOnMissingBean(
        name = "idempotencyKafkaContainerFactories",
        search = SearchStrategy.CURRENT)
    static BeanPostProcessor idempotencyKafkaContainerFactories(Environment environment) {
      return ListenerContainerHooks.kafkaContainerFactories(backOff(environment));
    }

    @Bean
    @ConditionalOnMissingBean(name = "idempotencyKafkaContainers", search = SearchStrategy.CURRENT)
    SmartLifecycle idempotencyKafkaContainers(
        ObjectProvider<org.springframework.kafka.config.KafkaListenerEndpointRegistry> registries,
        IdempotencyMessagingProperties properties) {
      return ListenerContainerHooks.kafkaContainers(
          registries, properties.getBackOff().toBackOff());
    }
  }

  /**
   * Spring AMQP: the advice first in every container factory's chain and in the chain of each
   * container bean of a guarded listener; the check of every container before it starts.
   */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass(
      name = "org.springframework.amqp.rabbit.config.BaseRabbitListenerContainerFactory")
  static class RabbitConfiguration {

    @Bean
    @Role(BeanDefinition.ROLE_INFRASTRUCTURE)
    @ConditionalOnMissingBean(
        name = "idempotencyRabbitContainerFactories",
        search = SearchStrategy.CURRENT)
    static BeanPostProcessor idempotencyRabbitContainerFactories(Environment environment) {
      return ListenerContainerHooks.rabbitContainerFactories(backOff(environment));
    }

    @Bean
    @ConditionalOnMissingBean(name = "idempotencyRabbitContainers", search = SearchStrategy.CURRENT)
    SmartLifecycle idempotencyRabbitContainers(
        ObjectProvider<org.springframework.amqp.rabbit.listener.RabbitListenerEndpointRegistry>
            registries,
        BeanFactory beanFactory) {
      return ListenerContainerHooks.rabbitContainers(registries, beanFactory);
    }
  }

  /** JMS: the listener of every container wrapped. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass(
      name = {"org.springframework.jms.config.JmsListenerEndpointRegistry", "jakarta.jms.Message"})
  static class JmsConfiguration {

    @Bean
    @Role(BeanDefinition.ROLE_INFRASTRUCTURE)
    @ConditionalOnMissingBean(
        name = "idempotencyJmsContainerFactories",
        search = SearchStrategy.CURRENT)
    static BeanPostProcessor idempotencyJmsContainerFactories(Environment environment) {
      return ListenerContainerHooks.jmsContainerFactories(backOff(environment));
    }

    @Bean
    @ConditionalOnMissingBean(name = "idempotencyJmsContainers", search = SearchStrategy.CURRENT)
    SmartLifecycle idempotencyJmsContainers(
        ObjectProvider<org.springframework.jms.config.JmsListenerEndpointRegistry> registries,
        IdempotencyMessagingProperties properties) {
      return ListenerContainerHooks.jmsContainers(registries, properties.getBackOff().toBackOff());
    }
  }

  /**
   * The backoff, bound from the environment: a post-processor is created before configuration
   * properties beans are.
   */
  private static dev.idempotency.spring.messaging.DeliveryBackOff backOff(Environment environment) {
    return messaging(environment).getBackOff().toBackOff();
  }

  private static IdempotencyMessagingProperties messaging(Environment environment) {
    return org.springframework.boot.context.properties.bind.Binder.get(environment)
        .bindOrCreate("idempotency.messaging", IdempotencyMessagingProperties.class);
  }

  /** Registers Spring's infrastructure auto-proxy creator, unless one is registered already. */
  static class AutoProxy implements ImportBeanDefinitionRegistrar {
    @Override
    public void registerBeanDefinitions(
        AnnotationMetadata metadata, BeanDefinitionRegistry registry) {
      AopConfigUtils.registerAutoProxyCreatorIfNecessary(registry);
    }
  }
}
