package dev.idempotency.spring.operations;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.testservers.FreePorts;
import java.net.URLEncoder;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * What a Boot application answers and logs while its store is down (PostgreSQL really stopped:
 * nothing listens on its port): the Actuator endpoint answers 503, not 500 with an ERROR; ten
 * requests to an idempotent endpoint log one WARN for the outage (the guard's), not one per
 * request.
 */
@ExtendWith(OutputCaptureExtension.class)
class OutageAnswersTest {

  private static ConfigurableApplicationContext startWithPostgresDown() {
    return Apps.start(
        "spring.datasource.url=jdbc:postgresql://127.0.0.1:" + FreePorts.next() + "/postgres",
        "spring.datasource.username=postgres",
        "management.endpoints.web.exposure.include=health,idempotency",
        "management.health.db.enabled=false",
        "management.health.redis.enabled=false");
  }

  /** The lines logged at {@code level} in {@code output}, logged after {@code from}. */
  private static List<String> lines(CapturedOutput output, int from, String level) {
    List<String> lines = new ArrayList<>();
    for (String line : output.getOut().substring(from).split("\\R")) {
      if (line.matches(".*\\s" + level + "\\s.*")) {
        lines.add(line);
      }
    }
    return lines;
  }

  @Test
  void theActuatorEndpointAnswers503WithoutAnErrorLog(CapturedOutput output) throws Exception {
    try (ConfigurableApplicationContext app = startWithPostgresDown()) {
      int from = output.getOut().length();

      HttpResponse<String> read =
          Apps.get(
              app,
              "/actuator/idempotency?key="
                  + URLEncoder.encode("otp:user_42:c1", StandardCharsets.UTF_8));

      assertThat(read.statusCode()).as(read.body()).isEqualTo(503);
      assertThat(lines(output, from, "ERROR")).as("no ERROR for an outage").isEmpty();
      assertThat(output.getOut().substring(from)).doesNotContain("\tat ");
    }
  }

  @Test
  void tenRequestsDuringAnOutageLogOneWarn(CapturedOutput output) throws Exception {
    try (ConfigurableApplicationContext app = startWithPostgresDown()) {
      int from = output.getOut().length();

      List<Integer> statuses = new ArrayList<>();
      for (int i = 0; i < 10; i++) {
        statuses.add(Apps.notify(app, Apps.newKey()).statusCode());
      }

      assertThat(statuses).containsOnly(503);
      assertThat(lines(output, from, "WARN"))
          .as("one WARN per outage (SPEC 14), the guard's")
          .hasSize(1)
          .allMatch(line -> line.contains("key store is failing"));
      assertThat(output.getOut().substring(from)).doesNotContain("\tat ");
    }
  }
}
