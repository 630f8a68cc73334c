package dev.idempotency.benchmarks.http;

import dev.idempotency.spring.web.IdempotentEndpoint;
import java.util.concurrent.atomic.AtomicLong;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.http.MediaType;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RestController;

/**
 * The application {@code run.sh} measures: {@code POST /plain} and {@code POST /guarded} do the
 * same trivial work (count the request, answer a small JSON body), the second under {@link
 * IdempotentEndpoint}. The stack (servlet or reactive) and the store (memory or redis) are chosen
 * by properties on the command line.
 */
@SpringBootApplication
public class HttpBenchApplication {

  public static void main(String[] args) {
    SpringApplication.run(HttpBenchApplication.class, args);
  }

  /** The two handlers: the same work, with and without the guard. */
  @RestController
  static class NotifyController {

    private final AtomicLong sent = new AtomicLong();

    @PostMapping(path = "/plain", produces = MediaType.APPLICATION_JSON_VALUE)
    public String plain(@RequestBody String body) {
      return answer(body);
    }

    @IdempotentEndpoint
    @PostMapping(path = "/guarded", produces = MediaType.APPLICATION_JSON_VALUE)
    public String guarded(@RequestBody String body) {
      return answer(body);
    }

    private String answer(String body) {
      return "{\"id\":" + sent.incrementAndGet() + ",\"bytes\":" + body.length() + "}";
    }
  }
}
