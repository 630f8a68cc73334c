package dev.idempotency.spring.actuate;

import java.util.Map;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthIndicator;

/**
 * The {@code idempotency} health contributor on Spring Boot 4: up when the store answers, down with
 * the error when it does not, unknown when the store cannot tell. Turn it off with {@code
 * management.health.idempotency.enabled=false}.
 */
public final class IdempotencyHealthIndicator implements HealthIndicator {

  private final StoreHealth check;

  /**
   * Creates the contributor.
   *
   * @param check the store check
   */
  public IdempotencyHealthIndicator(StoreHealth check) {
    this.check = check;
  }

  @Override
  public Health health() {
    Map<String, Object> details = StoreHealth.newDetails();
    return Health.status(check.check(details).name()).withDetails(details).build();
  }
}
