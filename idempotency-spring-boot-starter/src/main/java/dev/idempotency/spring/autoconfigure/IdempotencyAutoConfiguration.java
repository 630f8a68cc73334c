package dev.idempotency.spring.autoconfigure;

import dev.idempotency.FailureClassifier;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyListener;
import dev.idempotency.IdempotencyObserver;
import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.micrometer.MicrometerIdempotencyObserver;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spring.IdempotencyConfigurationException;
import dev.idempotency.spring.IdempotentMethodAdvisor;
import dev.idempotency.spring.Jackson2JsonCodecs;
import dev.idempotency.spring.Jackson3JsonCodecs;
import dev.idempotency.spring.JsonCodecs;
import dev.idempotency.spring.autoconfigure.IdempotencyProperties.StoreType;
import io.lettuce.core.RedisClient;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.observation.ObservationRegistry;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import javax.sql.DataSource;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.aop.config.AopConfigUtils;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.config.BeanDefinition;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;
import org.springframework.beans.factory.support.BeanDefinitionRegistry;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnSingleCandidate;
import org.springframework.boot.autoconfigure.condition.SearchStrategy;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.SmartLifecycle;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.context.annotation.ImportBeanDefinitionRegistrar;
import org.springframework.context.annotation.Role;
import org.springframework.core.type.AnnotationMetadata;

/**
 * Auto-configuration of the idempotency guard for Spring Boot 3.5 and 4.0: an {@link
 * IdempotencyGuard} on the application's own store, {@link dev.idempotency.spring.Idempotent}
 * methods, and JSON codecs from the application's mapper. Every bean backs off when the application
 * defines its own.
 *
 * <p>The store is a {@link KeyStore} bean if there is one; else what {@code idempotency.store}
 * names; else ({@code auto}) JDBC on the application's {@link DataSource} (durable, preferred),
 * else Redis on its Lettuce connection (Spring Data Redis) or {@link RedisClient} bean, else
 * DynamoDB on its {@code DynamoDbClient} bean, else in memory, with a warning that records then
 * live in one JVM. The choice is logged at INFO.
 */
@AutoConfiguration(
    afterName = {
      "org.springframework.boot.autoconfigure.jdbc.DataSourceAutoConfiguration",
      "org.springframework.boot.jdbc.autoconfigure.DataSourceAutoConfiguration",
      "org.springframework.boot.autoconfigure.data.redis.RedisAutoConfiguration",
      "org.springframework.boot.data.redis.autoconfigure.DataRedisAutoConfiguration",
      "org.springframework.boot.autoconfigure.jackson.JacksonAutoConfiguration",
      "org.springframework.boot.jackson.autoconfigure.JacksonAutoConfiguration",
      "org.springframework.boot.actuate.autoconfigure.metrics.CompositeMeterRegistryAutoConfiguration",
      "org.springframework.boot.micrometer.metrics.autoconfigure"
          + ".CompositeMeterRegistryAutoConfiguration",
      "org.springframework.boot.actuate.autoconfigure.observation.ObservationAutoConfiguration",
      "org.springframework.boot.micrometer.observation.autoconfigure.ObservationAutoConfiguration"
    })
@ConditionalOnClass(IdempotencyGuard.class)
@EnableConfigurationProperties(IdempotencyProperties.class)
@Import({
  StoreConfigurations.Jdbc.class,
  StoreConfigurations.Redis.class,
  StoreConfigurations.DynamoDb.class
})
public final class IdempotencyAutoConfiguration {

  private static final Logger log = LoggerFactory.getLogger(IdempotencyAutoConfiguration.class);

  /** Created by Spring Boot. */
  public IdempotencyAutoConfiguration() {}

  /**
   * The guard, on the chosen store, with the properties, the application's {@link
   * IdempotencyListener}, {@link IdempotencyObserver} and {@link FailureClassifier} beans, and its
   * {@link IdempotencyGuardCustomizer}s.
   *
   * @param store the store
   * @param properties the properties
   * @param listeners listener beans
   * @param observers observer beans (the Micrometer one, with Actuator)
   * @param classifier a failure classifier bean, if any
   * @param customizers customizer beans
   * @return the guard
   */
  @Bean
  @ConditionalOnMissingBean
  public IdempotencyGuard idempotencyGuard(
      KeyStore store,
      IdempotencyProperties properties,
      ObjectProvider<IdempotencyListener> listeners,
      ObjectProvider<IdempotencyObserver> observers,
      ObjectProvider<FailureClassifier> classifier,
      ObjectProvider<IdempotencyGuardCustomizer> customizers) {
    IdempotencyGuard.Builder builder =
        IdempotencyGuard.builder()
            .store(store)
            .lease(properties.getLease())
            .inFlightWait(properties.getInFlightWait())
            .failOpen(properties.isFailOpen())
            .takeoverPolicy(properties.getTakeoverPolicy())
            .leaseRenewal(properties.isLeaseRenewal())
            .closeGracePeriod(properties.getCloseGracePeriod())
            .maxPendingOutcomes(properties.getMaxPendingOutcomes());
    properties
        .getOperations()
        .forEach(
            (operation, settings) -> {
              if (settings.getFailOpen() != null) {
                requireOperationName(operation);
                builder.failOpen(operation, settings.getFailOpen());
              }
            });
    listeners.orderedStream().forEach(builder::listener);
    observers.orderedStream().forEach(builder::observer);
    classifier.ifUnique(builder::failureClassifier);
    customizers.orderedStream().forEach(customizer -> customizer.customize(builder));
    return builder.build();
  }

  /**
   * Closes the context's guard when the context closes, in a lifecycle phase after the web server
   * and the listener containers have stopped and before Spring Data Redis's connection factory
   * stops: the guard's grace period (calls still running finish, their outcomes recorded) then runs
   * while the store's connections still work.
   *
   * @param beanFactory the context's bean factory, whose own guards it closes
   * @return the lifecycle bean
   */
  @Bean
  @ConditionalOnMissingBean(name = "idempotencyGuardShutdown")
  static SmartLifecycle idempotencyGuardShutdown(ConfigurableListableBeanFactory beanFactory) {
    return new GuardShutdown(beanFactory);
  }

  /**
   * The store: the one {@code idempotency.store} names, or in {@code auto} the first there is of
   * JDBC, Redis, DynamoDB and memory.
   *
   * @param properties the properties
   * @param candidates the stores the application could use
   * @param observers observer beans, told of the in-memory store's early evictions
   * @return the store
   * @throws IllegalStateException if the store named is not available
   */
  @Bean
  @ConditionalOnMissingBean(KeyStore.class)
  public KeyStore idempotencyKeyStore(
      IdempotencyProperties properties,
      ObjectProvider<StoreCandidate> candidates,
      ObjectProvider<IdempotencyObserver> observers) {
    List<StoreCandidate> available = candidates.orderedStream().toList();
    StoreType wanted = properties.getStore();
    StoreCandidate chosen;
    if (wanted == StoreType.AUTO) {
      chosen =
          find(available, StoreType.JDBC)
              .or(() -> find(available, StoreType.REDIS))
              .or(() -> find(available, StoreType.DYNAMODB))
              .orElseGet(() -> memory(properties, observers, true));
    } else if (wanted == StoreType.MEMORY) {
      chosen = memory(properties, observers, false);
    } else {
      chosen =
          find(available, wanted)
              .orElseThrow(
                  () ->
                      new IdempotencyConfigurationException(
                          "idempotency.store="
                              + wanted.name().toLowerCase(Locale.ROOT)
                              + " but the application has no "
                              + missing(wanted)
                              + ".",
                          "Define that bean (or add what the auto-configuration builds it"
                              + " from), or set idempotency.store to a store the application"
                              + " has (auto chooses one)."));
    }
    log.info(
        "Idempotency store: {} ({}){}",
        chosen.type().name().toLowerCase(Locale.ROOT),
        chosen.description(),
        wanted == StoreType.AUTO ? ", chosen by idempotency.store=auto" : "");
    return chosen.store().get();
  }

  /**
   * Whether the guard is this auto-configuration's, built from {@code idempotency.lease}: only then
   * are windows checked against that lease at startup (an application's own guard has its own,
   * which it checks at the first call).
   */
  static boolean isAutoConfigured(ConfigurableListableBeanFactory beanFactory) {
    String[] names = beanFactory.getBeanNamesForType(IdempotencyGuard.class, true, false);
    if (names.length != 1 || !beanFactory.containsBeanDefinition(names[0])) {
      return false;
    }
    BeanDefinition definition = beanFactory.getBeanDefinition(names[0]);
    return IdempotencyAutoConfiguration.class.getName().equals(definition.getFactoryBeanName());
  }

  /**
   * The lease that every window must be longer than at startup: the auto-configured guard's, from
   * the properties of the context that holds it, which for a child context on its parent's guard is
   * the parent; null if the guard is the application's own (it checks windows at the first call).
   */
  static @Nullable Duration autoConfiguredLease(
      ConfigurableListableBeanFactory beanFactory,
      ObjectProvider<IdempotencyProperties> properties) {
    if (beanFactory.getBeanNamesForType(IdempotencyGuard.class, true, false).length == 0
        && beanFactory.getParentBeanFactory() instanceof ConfigurableListableBeanFactory parent) {
      return autoConfiguredLease(parent, parent.getBeanProvider(IdempotencyProperties.class));
    }
    return isAutoConfigured(beanFactory) ? properties.getObject().getLease() : null;
  }

  private static void requireOperationName(String operation) {
    if (!dev.idempotency.IdempotencyKey.isOperationName(operation)) {
      throw new IdempotencyConfigurationException(
          "idempotency.operations."
              + operation
              + ": '"
              + operation
              + "' is not an operation name (1 to 64 characters of [A-Za-z0-9_.-]).",
          "Key idempotency.operations by the operation's name (@Idempotent(name = ...) or its"
              + " default, such as Mailer.send).");
    }
  }

  private static String missing(StoreType wanted) {
    return switch (wanted) {
      case JDBC -> "single DataSource bean (or the idempotency-jdbc classes)";
      case DYNAMODB ->
          "single DynamoDbClient bean (or the idempotency-dynamodb classes: add"
              + " dev.idempotency:idempotency-dynamodb and an AWS SDK HTTP client)";
      default -> "Lettuce connection factory or RedisClient bean (or the lettuce-core classes)";
    };
  }

  private static Optional<StoreCandidate> find(List<StoreCandidate> candidates, StoreType type) {
    return candidates.stream().filter(candidate -> candidate.type() == type).findFirst();
  }

  private static StoreCandidate memory(
      IdempotencyProperties properties,
      ObjectProvider<IdempotencyObserver> observers,
      boolean warn) {
    if (warn) {
      log.warn(
          "Idempotency records are kept in this JVM's memory: they are lost on restart and not"
              + " shared with other instances. Give the application a DataSource, Redis or a"
              + " DynamoDbClient, or set idempotency.store=memory to choose this on purpose");
    }
    return new StoreCandidate(
        StoreType.MEMORY,
        "in this JVM, at most " + properties.getMemory().getMaximumSize() + " records",
        () ->
            InMemoryKeyStore.builder()
                .maximumSize(properties.getMemory().getMaximumSize())
                // early evictions reach the observers (metrics) like the guard's own events
                .listener(event -> observers.orderedStream().forEach(o -> o.onEvent(event)))
                .build());
  }

  /**
   * Micrometer meters and an observation per call, when the application has a {@code MeterRegistry}
   * (Spring Boot Actuator), with its {@code ObservationRegistry} if it has one.
   */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass({MeterRegistry.class, MicrometerIdempotencyObserver.class})
  @ConditionalOnBean(MeterRegistry.class)
  static class MicrometerConfiguration {
    @Bean
    @ConditionalOnMissingBean
    MicrometerIdempotencyObserver micrometerIdempotencyObserver(
        MeterRegistry meters, ObjectProvider<ObservationRegistry> observations) {
      return MicrometerIdempotencyObserver.builder(meters)
          .observationRegistry(observations.getIfUnique(() -> ObservationRegistry.NOOP))
          .build();
    }
  }

  /** JSON codecs on Jackson 3, the mapper Spring Boot 4 configures. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass(name = "tools.jackson.databind.json.JsonMapper")
  static class Jackson3Configuration {
    @Bean
    @ConditionalOnMissingBean(JsonCodecs.class)
    @ConditionalOnSingleCandidate(tools.jackson.databind.ObjectMapper.class)
    JsonCodecs idempotencyJsonCodecs(tools.jackson.databind.ObjectMapper mapper) {
      return new Jackson3JsonCodecs(mapper);
    }
  }

  /** JSON codecs on Jackson 2, the mapper Spring Boot 3.5 configures. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass(name = "com.fasterxml.jackson.databind.ObjectMapper")
  static class Jackson2Configuration {
    @Bean
    @ConditionalOnMissingBean(JsonCodecs.class)
    @ConditionalOnSingleCandidate(com.fasterxml.jackson.databind.ObjectMapper.class)
    JsonCodecs idempotencyJackson2JsonCodecs(com.fasterxml.jackson.databind.ObjectMapper mapper) {
      return new Jackson2JsonCodecs(mapper);
    }
  }

  /**
   * {@code @Idempotent} methods: the advisor, and an auto-proxy creator if the application has none
   * (Spring Boot's AOP auto-configuration, when on, registers one already).
   */
  @Configuration(proxyBeanMethods = false)
  @Import(IdempotentMethodsConfiguration.AutoProxy.class)
  static class IdempotentMethodsConfiguration {

    // CURRENT: an advisor proxies only the beans of its own context, so a child context (as
    // SpringApplicationBuilder.child builds it) needs its own even when its parent has one; the
    // guard and store above are looked up in the whole hierarchy and shared, as they should be
    @Bean
    @Role(BeanDefinition.ROLE_INFRASTRUCTURE)
    @ConditionalOnMissingBean(search = SearchStrategy.CURRENT)
    static IdempotentMethodAdvisor idempotentMethodAdvisor(
        ConfigurableListableBeanFactory beanFactory,
        ObjectProvider<IdempotencyGuard> guard,
        ObjectProvider<JsonCodecs> json,
        ObjectProvider<IdempotencyProperties> properties) {
      return new IdempotentMethodAdvisor(
          ClosestGuard.of(beanFactory, guard),
          () ->
              json.getIfAvailable(
                  () -> {
                    throw new IllegalStateException(
                        "an @Idempotent method returns a value, but the application has no JSON"
                            + " mapper (Jackson) to store it with; add one or define a JsonCodecs"
                            + " bean");
                  }),
          operation -> properties.getObject().ttlOf(operation),
          () -> autoConfiguredLease(beanFactory, properties),
          () -> properties.getObject().getInFlightWait());
    }

    /**
     * Fails the start of a child context whose {@code @Idempotent} or {@code @IdempotentListener}
     * methods no advisor guards (a child with no auto-configuration of its own).
     */
    @Bean
    @ConditionalOnMissingBean(search = SearchStrategy.CURRENT)
    static UnguardedChildContexts idempotencyUnguardedChildContexts() {
      return new UnguardedChildContexts();
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
}
