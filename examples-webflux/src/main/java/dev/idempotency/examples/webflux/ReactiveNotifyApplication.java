package dev.idempotency.examples.webflux;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;

/**
 * The notify service on Spring WebFlux and Reactor Netty. With the starter and a Redis connection
 * on the class path, {@code @IdempotentEndpoint} needs no configuration: the starter takes Redis as
 * its store and guards the annotated handler from a {@code WebFilter}, without blocking an event
 * loop.
 *
 * <pre>
 * mvn -pl examples-webflux -am spring-boot:run    (or exec:java, as docs/examples.md shows)
 * </pre>
 */
@SpringBootApplication
public class ReactiveNotifyApplication {

  /**
   * Starts the service on port 8080, or {@code --server.port}.
   *
   * @param args Spring Boot's arguments, such as {@code --spring.data.redis.url=redis://host:6379}
   */
  public static void main(String[] args) {
    SpringApplication.run(ReactiveNotifyApplication.class, args);
  }
}
