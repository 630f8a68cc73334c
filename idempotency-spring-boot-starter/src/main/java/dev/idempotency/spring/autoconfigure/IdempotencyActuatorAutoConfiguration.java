package dev.idempotency.spring.autoconfigure;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spring.IdempotencyConfigurationException;
import dev.idempotency.spring.actuate.Boot3IdempotencyHealthIndicator;
import dev.idempotency.spring.actuate.IdempotencyEndpoint;
import dev.idempotency.spring.actuate.IdempotencyEndpointWebExtension;
import dev.idempotency.spring.actuate.IdempotencyHealthIndicator;
import dev.idempotency.spring.actuate.StoreHealth;
import java.util.ArrayList;
import java.util.List;
import org.springframework.boot.actuate.autoconfigure.endpoint.condition.ConditionalOnAvailableEndpoint;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.env.Environment;

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
   * The endpoint, read-only unless its own access property says otherwise.
   *
   * @param guard the guard
   * @param environment the application's settings, checked for access granted by the way
   * @return the endpoint
   * @throws IllegalStateException if a broader setting would make the endpoint unrestricted
   */
  @Bean
  @ConditionalOnMissingBean
  @ConditionalOnAvailableEndpoint
  public IdempotencyEndpoint idempotencyEndpoint(IdempotencyGuard guard, Environment environment) {
    refuseAccessGrantedByTheWay(environment);
    return new IdempotencyEndpoint(guard);
  }

  /** The endpoint's own access property: the one setting that may make its delete reachable. */
  static final String ACCESS = "management.endpoint.idempotency.access";

  /**
   * Fails the start where a setting that is not the endpoint's own access property would make it
   * unrestricted: Boot reads {@code management.endpoint.idempotency.enabled=true} and {@code
   * management.endpoints.enabled-by-default=true} (deprecated forms Boot 3.5 and 4.0 still read)
   * and {@code management.endpoints.access.default=unrestricted} as full access, so exposing the
   * endpoint would let an anonymous {@code DELETE} forget keys, and the next call send again (SPEC
   * 14: deletes need {@value #ACCESS}{@code =unrestricted}). Naming the endpoint's access, or
   * capping every endpoint with {@code management.endpoints.access.max-permitted}, decides instead.
   */
  static void refuseAccessGrantedByTheWay(Environment environment) {
    if (environment.containsProperty(ACCESS)) {
      return;
    }
    String cap = environment.getProperty("management.endpoints.access.max-permitted");
    if (cap != null && !cap.trim().equalsIgnoreCase("unrestricted")) {
      return;
    }
    List<String> granting = new ArrayList<>();
    if ("unrestricted"
        .equalsIgnoreCase(
            environment.getProperty("management.endpoints.access.default", "").trim())) {
      granting.add("management.endpoints.access.default=unrestricted");
    }
    // deprecated since Boot 3.4, still read by Boot 3.5 and 4.0 as full access
    if (environment.getProperty("management.endpoint.idempotency.enabled", Boolean.class, false)) {
      granting.add("management.endpoint.idempotency.enabled=true");
    }
    if (environment.getProperty("management.endpoints.enabled-by-default", Boolean.class, false)) {
      granting.add("management.endpoints.enabled-by-default=true");
    }
    if (!granting.isEmpty()) {
      throw new IdempotencyConfigurationException(
          String.join(", ", granting)
              + " would give the idempotency Actuator endpoint unrestricted access, so that a"
              + " DELETE could forget keys (and the next call send again).",
          "Name its access: "
              + ACCESS
              + "=read-only to keep it read-only, or "
              + ACCESS
              + "=unrestricted if forgetting keys over HTTP is intended (behind security)");
    }
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
