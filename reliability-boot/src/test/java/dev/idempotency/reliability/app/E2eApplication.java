package dev.idempotency.reliability.app;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;

/**
 * The application under the end-to-end fault run: a Spring Boot service with the idempotency
 * starter on PostgreSQL, whose every provider send goes over HTTP to the run's stand-in provider
 * ({@link ProviderClient}). {@link SendController} has a blocking and an async
 * {@code @IdempotentEndpoint}. Started by the run as a child JVM with its settings as arguments.
 */
@SpringBootApplication
public class E2eApplication {

  /**
   * Starts the service.
   *
   * @param args Spring Boot arguments: {@code --server.port}, {@code --spring.datasource.url},
   *     {@code --provider.url}, {@code --instance}
   */
  public static void main(String[] args) {
    SpringApplication.run(E2eApplication.class, args);
  }
}
