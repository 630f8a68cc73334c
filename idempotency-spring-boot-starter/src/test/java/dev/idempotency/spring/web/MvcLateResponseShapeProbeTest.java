package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import jakarta.servlet.http.HttpServletResponse;
import java.net.http.HttpResponse;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.http.HttpStatus;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.ResponseStatus;
import org.springframework.web.bind.annotation.RestController;

/**
 * probeE: the response stored for a result that came after the container async timeout (1 s) was
 * rendered by {@code LateResponse} into a fresh in-memory response, reading only the handler
 * method's own {@code @ResponseStatus} (2/2 failed; fixed in fixlate: it now starts from the
 * response as the handler left it and reads the class's {@code @ResponseStatus} too). Without a
 * timeout, Spring MVC answers with the status and headers set before the async work began: a
 * {@code @ResponseStatus(CREATED)} on the controller class (Spring MVC reads the class's too), or a
 * status and a header (the endpoint lists it) set by the handler on its {@code HttpServletResponse}
 * before it returned the {@code Callable}. SPEC 13: the response is replayed byte for byte (status,
 * body, Content-Type, Location, listed headers). The control (no timeout) replays 201/202 with the
 * header; expected the same after a timeout.
 */
@SpringBootTest(
    classes = MvcLateResponseShapeProbeTest.ProbeApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class MvcLateResponseShapeProbeTest extends MvcLateFixture {

  @Override
  public int runs() {
    return ClassStatusController.runs.get();
  }

  @ParameterizedTest
  @ValueSource(strings = {"class-status", "servlet-status"})
  void withoutATimeoutTheReplayHasTheFirstAnswersStatusAndHeader(String kind) throws Exception {
    String key = EndpointClient.newKey();
    String path = "/probe/shape/" + kind;
    gate.countDown();

    HttpResponse<byte[]> first = post(path, key, "{}");
    HttpResponse<byte[]> replay = post(path, key, "{}");

    int expected = kind.equals("class-status") ? 201 : 202;
    assertThat(first.statusCode()).as(EndpointClient.text(first)).isEqualTo(expected);
    assertThat(replay.statusCode()).isEqualTo(expected);
    assertThat(EndpointClient.header(replay, "Idempotent-Replayed")).isEqualTo("true");
    assertThat(EndpointClient.header(replay, "X-Order-Version")).isEqualTo("7");
  }

  @ParameterizedTest
  @ValueSource(strings = {"class-status", "servlet-status"})
  void afterATimeoutTheReplayHasTheStatusAndHeaderTheHandlerGave(String kind) throws Exception {
    String key = EndpointClient.newKey();
    String path = "/probe/shape/" + kind;
    int before = ClassStatusController.runs.get();

    HttpResponse<byte[]> timedOut = postTimedOut(path, key);
    HttpResponse<byte[]> replay = retry(path, key);

    String answers =
        String.format(
            "first %s; replay %s replayed=%s X-Order-Version=%s %s",
            timedOut.statusCode(),
            replay.statusCode(),
            EndpointClient.header(replay, "Idempotent-Replayed"),
            EndpointClient.header(replay, "X-Order-Version"),
            EndpointClient.text(replay));
    int expected = kind.equals("class-status") ? 201 : 202;
    assertThat(timedOut.statusCode()).as(answers).isEqualTo(409);
    assertThat(ClassStatusController.runs.get() - before).as(answers).isEqualTo(1);
    assertThat(EndpointClient.header(replay, "Idempotent-Replayed")).as(answers).isEqualTo("true");
    assertThat(replay.statusCode()).as("replayed status (%s)", answers).isEqualTo(expected);
    assertThat(EndpointClient.header(replay, "X-Order-Version"))
        .as("listed header (%s)", answers)
        .isEqualTo("7");
  }

  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import({ClassStatusController.class, ServletStatusController.class})
  static class ProbeApplication {}

  @RestController
  @ResponseStatus(HttpStatus.CREATED)
  static class ClassStatusController {
    static final AtomicInteger runs = new AtomicInteger();

    static Map<String, String> send(boolean hold, int run) {
      if (hold) {
        awaitGate();
      }
      return Map.of("id", "sent-" + run);
    }

    /** Created, as the class says; the header set on the response before the work. */
    @IdempotentEndpoint(headers = "X-Order-Version")
    @PostMapping("/probe/shape/class-status")
    Callable<Map<String, String>> classStatus(
        @RequestHeader(name = HOLD, required = false) String hold, HttpServletResponse response) {
      int run = runs.incrementAndGet();
      response.setHeader("X-Order-Version", "7");
      return () -> send(hold != null, run);
    }
  }

  @RestController
  static class ServletStatusController {
    /** Accepted, set by the handler on its response, with the header, before the work. */
    @IdempotentEndpoint(headers = "X-Order-Version")
    @PostMapping("/probe/shape/servlet-status")
    Callable<Map<String, String>> servletStatus(
        @RequestHeader(name = HOLD, required = false) String hold, HttpServletResponse response) {
      int run = ClassStatusController.runs.incrementAndGet();
      response.setStatus(HttpStatus.ACCEPTED.value());
      response.setHeader("X-Order-Version", "7");
      return () -> ClassStatusController.send(hold != null, run);
    }
  }
}
