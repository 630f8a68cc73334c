package dev.idempotency.spring.fluxapp;

import dev.idempotency.spring.app.Runs;
import java.security.Principal;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.annotation.Bean;
import org.springframework.core.Ordered;
import org.springframework.core.annotation.Order;
import org.springframework.web.server.WebFilter;
import reactor.core.publisher.Mono;

/**
 * The WebFlux twin of the Spring MVC test application ({@code NotifyTestApplication}): the same
 * paths, answered the same ways in WebFlux's own idiom, so that the endpoint's shared test cases
 * run against both.
 */
@SpringBootApplication
public class FluxEndpointApplication {

  @Bean
  Runs runs() {
    return new Runs();
  }

  /** Stands in for authentication: the X-User header becomes the exchange's principal. */
  @Bean
  @Order(Ordered.HIGHEST_PRECEDENCE)
  WebFilter fakeAuthentication() {
    return (exchange, chain) -> {
      String user = exchange.getRequest().getHeaders().getFirst("X-User");
      if (user == null) {
        return chain.filter(exchange);
      }
      Principal principal = () -> user;
      return chain.filter(exchange.mutate().principal(Mono.just(principal)).build());
    };
  }
}
