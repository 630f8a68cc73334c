package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spi.KeyStore;
import dev.idempotency.spring.app.NotifyController;
import dev.idempotency.spring.app.NotifyTestApplication;
import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;

/**
 * SPEC section 13's HTTP paragraph, end to end over real HTTP against a Spring MVC Boot application
 * on a real store (each subclass picks one): from the interfaces it implements, the statuses and
 * replays ({@link StatusCases}), what is stored and released on every path a Spring application
 * takes ({@link ResponseCases}), async handlers ({@link AsyncCases}) and request bodies and keys
 * ({@link RequestCases}).
 */
@SpringBootTest(
    classes = NotifyTestApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
    properties = {
      "idempotency.in-flight-wait=200ms",
      "idempotency.http.max-body-size=4KB",
      "idempotency.http.max-response-size=8KB",
      "server.error.include-message=always", // Boot 3.5
      "spring.web.error.include-message=always" // Boot 4.0
    })
abstract class EndpointContract extends RunningApplication
    implements StatusCases, ResponseCases, AsyncCases, RequestCases {

  @Autowired NotifyController controller;
  @Autowired KeyStore store;

  /** The store this variant must be running on. */
  abstract Class<? extends KeyStore> expectedStore();

  @Override
  public void holdHandlers(CountDownLatch latch) {
    controller.gate(latch);
  }

  @Override
  public boolean awaitAHeldHandler() throws InterruptedException {
    return controller.awaitAtTheGate();
  }

  @Test
  void theApplicationRunsOnTheExpectedStore() {
    assertThat(store).isInstanceOf(expectedStore());
  }
}
