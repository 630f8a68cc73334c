package dev.idempotency.spring.autoconfigure;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spring.actuate.Boot3IdempotencyHealthIndicator;
import dev.idempotency.spring.actuate.IdempotencyEndpoint;
import dev.idempotency.spring.actuate.IdempotencyEndpointWebExtension;
import dev.idempotency.spring.actuate.IdempotencyHealthIndicator;
import dev.idempotency.spring.actuate.StoreHealth;
import org.springframework.boot.actuate.autoconfigure.endpoint.condition.ConditionalOnAvailableEndpoint;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * Actuator support for the guard, where the application has Spring Boot Actuator: the {@code
 * idempotency} health contributor (Boot 3.5's or Boot 4's health API, whichever is present) and the
 * {@code idempotency} endpoint, which is available but, like every endpoint but health, not exposed
 * over HTTP until the application exposes it, and read-only until the application grants it more
 * access ({@code management.endpoint.idempotency.access=unrestricted}).
 */
@AutoConfiguration(after = IdempotencyAutoConfiguration.class)
@ConditionalOnClass(
    name = "org.springframework.boot.actuate.endpoint.annotation.Endpoint",
    value = IdempotencyGuard.class)
@ConditionalOnBean(IdempotencyGuard.class)
public final class IdempotencyActuatorAutoConfiguration {

  /** Created by Spring Boot. */
  public IdempotencyActuatorAutoConfiguration() {}

  /**
   * The endpoint.
   *
   * @param guard the guard
   * @return the endpoint
   */
  @Bean
  @ConditionalOnMissingBean
  @ConditionalOnAvailableEndpoint
  public IdempotencyEndpoint idempotencyEndpoint(IdempotencyGuard guard) {
    return new IdempotencyEndpoint(guard);
  }

  /**
   * The endpoint's HTTP answers: 404 for no record, 503 while the store cannot answer.
   *
   * @param endpoint the endpoint
   * @return its web extension
   */
  @Bean
  @ConditionalOnMissingBean
  @ConditionalOnAvailableEndpoint(endpoint = IdempotencyEndpoint.class)
  public IdempotencyEndpointWebExtension idempotencyEndpointWebExtension(
      IdempotencyEndpoint endpoint) {
    return new IdempotencyEndpointWebExtension(endpoint);
  }

  /** The health contributor on Spring Boot 4 ({@code spring-boot-health}). */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass(name = "org.springframework.boot.health.contributor.HealthIndicator")
  @ConditionalOnBean(KeyStore.class)
  @org.springframework.boot.health.autoconfigure.contributor.ConditionalOnEnabledHealthIndicator(
      "idempotency")
  static class Boot4Health {
    @Bean
    @ConditionalOnMissingBean(name = "idempotencyHealthIndicator")
    IdempotencyHealthIndicator idempotencyHealthIndicator(IdempotencyGuard guard, KeyStore store) {
      return new IdempotencyHealthIndicator(new StoreHealth(guard, store));
    }
  }

  /** The health contributor on Spring Boot 3.5. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass(name = "org.springframework.boot.actuate.health.HealthIndicator")
  @ConditionalOnBean(KeyStore.class)
  @org.springframework.boot.actuate.autoconfigure.health.ConditionalOnEnabledHealthIndicator(
      "idempotency")
  static class Boot3Health {
    @Bean
    @ConditionalOnMissingBean(name = "idempotencyHealthIndicator")
    Boot3IdempotencyHealthIndicator idempotencyHealthIndicator(
        IdempotencyGuard guard, KeyStore store) {
      return new Boot3IdempotencyHealthIndicator(new StoreHealth(guard, store));
    }
  }
}
