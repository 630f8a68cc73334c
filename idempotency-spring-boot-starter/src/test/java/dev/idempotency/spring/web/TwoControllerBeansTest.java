package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import org.junit.jupiter.api.Test;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.annotation.Bean;
import org.springframework.core.NestedExceptionUtils;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;

/**
 * Issue 37: an {@link IdempotentEndpoint}'s key is scoped to its HTTP method and path pattern, not
 * to its class, so two beans of one controller class could only share a namespace by sharing a
 * mapping, which Spring MVC refuses at startup. This pins that the start fails (the names check of
 * {@code @Idempotent} methods is not needed for endpoints).
 */
class TwoControllerBeansTest {

  @RestController
  static class NoticeController {
    @PostMapping("/two-beans/notices")
    @IdempotentEndpoint
    public String send() {
      return "sent";
    }
  }

  @SpringBootConfiguration
  @EnableAutoConfiguration
  static class TwoControllers {
    @Bean
    NoticeController smsController() {
      return new NoticeController();
    }

    @Bean
    NoticeController emailController() {
      return new NoticeController();
    }
  }

  @Test
  void twoBeansOfOneControllerClassFailTheStart() {
    Throwable failure =
        catchThrowable(
            () ->
                new SpringApplicationBuilder(TwoControllers.class)
                    .properties("idempotency.store=memory", "server.port=0")
                    .run()
                    .close());

    assertThat(failure).isNotNull();
    assertThat(NestedExceptionUtils.getMostSpecificCause(failure))
        .hasMessageContaining("Ambiguous mapping");
  }
}
