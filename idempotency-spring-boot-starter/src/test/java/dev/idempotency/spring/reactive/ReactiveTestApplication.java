package dev.idempotency.spring.reactive;

import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.annotation.Bean;

/** A small reactive notify service for the starter's reactive tests. */
@SpringBootApplication
public class ReactiveTestApplication {

  @Bean
  ReactiveMailer reactiveMailer() {
    return new ReactiveMailer();
  }
}
