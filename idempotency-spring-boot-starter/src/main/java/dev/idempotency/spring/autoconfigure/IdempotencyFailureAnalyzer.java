package dev.idempotency.spring.autoconfigure;

import dev.idempotency.spring.IdempotencyConfigurationException;
import org.springframework.boot.diagnostics.AbstractFailureAnalyzer;
import org.springframework.boot.diagnostics.FailureAnalysis;

/**
 * Spring Boot's report of a start the starter refused ({@link IdempotencyConfigurationException}):
 * its problem under "Description" and what to do under "Action", found wherever Spring wrapped it
 * (a {@code BeanCreationException} around an {@code UnsatisfiedDependencyException}, say), so that
 * the starter's message is not only the last line of a long stack trace. Registered in {@code
 * META-INF/spring.factories} under {@code org.springframework.boot.diagnostics.FailureAnalyzer},
 * which Spring Boot 3.5 and 4.0 both read.
 */
class IdempotencyFailureAnalyzer
    extends AbstractFailureAnalyzer<IdempotencyConfigurationException> {

  @Override
  protected FailureAnalysis analyze(
      Throwable rootFailure, IdempotencyConfigurationException cause) {
    return new FailureAnalysis(cause.getProblem(), cause.getAction(), cause);
  }
}
