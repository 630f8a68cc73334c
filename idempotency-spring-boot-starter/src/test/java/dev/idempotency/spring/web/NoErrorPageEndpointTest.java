package dev.idempotency.spring.web;

import static dev.idempotency.spring.web.EndpointClient.header;
import static dev.idempotency.spring.web.EndpointClient.newKey;
import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.app.NotifyTestApplication;
import java.net.http.HttpResponse;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.SpringBootTest;

/**
 * An application without Spring Boot's error pages: after a handler's sendError the container
 * writes its own page, with no error dispatch for the filter to see. The request's end (the request
 * listener) stores the status, without the body it could not see, so the handler still runs once.
 */
@SpringBootTest(
    classes = NotifyTestApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
    properties = {
      "idempotency.store=memory",
      "spring.autoconfigure.exclude="
          + "org.springframework.boot.autoconfigure.web.servlet.error.ErrorMvcAutoConfiguration,"
          + "org.springframework.boot.webmvc.autoconfigure.error.ErrorMvcAutoConfiguration"
    })
class NoErrorPageEndpointTest extends RunningApplication {

  @Test
  void sendErrorWithTheContainersOwnPageIsStoredByItsStatus() throws Exception {
    String key = newKey();

    HttpResponse<byte[]> first = post("/invoices/i_3/pay", key, "");
    HttpResponse<byte[]> repeat = post("/invoices/i_3/pay", key, "");

    assertThat(first.statusCode()).isEqualTo(402);
    assertThat(repeat.statusCode()).isEqualTo(402);
    assertThat(header(repeat, "Idempotent-Replayed")).isEqualTo("true");
    assertThat(repeat.body()).as("the container's page was never seen").isEmpty();
    assertThat(runs()).isEqualTo(1);
  }

  @Test
  void aResponseStatusExceptionWithTheContainersOwnPageIsStoredByItsStatus() throws Exception {
    String key = newKey();

    HttpResponse<byte[]> first = post("/orders/o_3/cancel", key, "");
    HttpResponse<byte[]> repeat = post("/orders/o_3/cancel", key, "");

    assertThat(first.statusCode()).isEqualTo(404);
    assertThat(repeat.statusCode()).isEqualTo(404);
    assertThat(header(repeat, "Idempotent-Replayed")).isEqualTo("true");
    assertThat(runs()).isEqualTo(1);
  }
}
