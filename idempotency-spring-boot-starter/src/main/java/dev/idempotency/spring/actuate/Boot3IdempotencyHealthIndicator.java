package dev.idempotency.spring.actuate;

import java.util.Map;
import org.springframework.boot.actuate.health.Health;
import org.springframework.boot.actuate.health.HealthIndicator;

/**
 * The {@code idempotency} health contributor on Spring Boot 3.5: up when the store answers, down
 * with the error when it does not, unknown when the store cannot tell. Turn it off with {@code
 * management.health.idempotency.enabled=false}.
 */
public final class Boot3IdempotencyHealthIndicator implements HealthIndicator {

  private final StoreHealth check;

  /**
   * Creates the contributor.
   *
   * @param check the store check
   */
  public Boot3IdempotencyHealthIndicator(StoreHealth check) {
    this.check = check;
  }

  @Override
  public Health health() {
    Map<String, Object> details = StoreHealth.newDetails();
    return Health.status(check.check(details).name()).withDetails(details).build();
  }
}
