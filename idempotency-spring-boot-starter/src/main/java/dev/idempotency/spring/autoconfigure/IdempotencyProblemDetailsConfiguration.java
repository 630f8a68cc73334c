package dev.idempotency.spring.autoconfigure;

import dev.idempotency.spring.web.IdempotencyExceptionHandler;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * The {@link IdempotencyExceptionHandler}, defined once for both web stacks: the Spring MVC and the
 * Spring WebFlux auto-configurations each import it, and only the one of the application's stack
 * applies, so an application gets the advice on either, unless it defines its own or sets {@code
 * idempotency.http.problem-details=false}.
 */
@Configuration(proxyBeanMethods = false)
@ConditionalOnProperty(
    prefix = "idempotency.http",
    name = "problem-details",
    havingValue = "true",
    matchIfMissing = true)
final class IdempotencyProblemDetailsConfiguration {

  /**
   * The guard's refusals that reach a controller, answered as problems (400, 422, 409, 503).
   *
   * @return the advice
   */
  @Bean
  @ConditionalOnMissingBean
  IdempotencyExceptionHandler idempotencyExceptionHandler() {
    return new IdempotencyExceptionHandler();
  }
}
