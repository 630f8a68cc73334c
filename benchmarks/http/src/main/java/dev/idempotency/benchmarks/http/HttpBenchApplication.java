package dev.idempotency.benchmarks.http;

import dev.idempotency.spi.KeyStore;
import dev.idempotency.spring.web.IdempotentEndpoint;
import java.util.concurrent.atomic.AtomicLong;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.autoconfigure.condition.ConditionalOnWebApplication;
import org.springframework.boot.autoconfigure.condition.ConditionalOnWebApplication.Type;
import org.springframework.boot.context.event.ApplicationReadyEvent;
import org.springframework.context.ApplicationListener;
import org.springframework.context.annotation.Bean;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import reactor.core.publisher.Mono;

/**
 * The application {@code run.sh} measures: {@code POST /plain} and {@code POST /guarded} do the
 * same trivial work (count the request, answer a small JSON body), the second under {@link
 * IdempotentEndpoint}. {@code POST /floor} (Redis only) does the same work with only the Redis
 * commands any result-storing guard must send, written with Lettuce on the store's own connection
 * ({@link RedisFloor}): guarded against floor is the SDK's own cost. The stack (servlet or
 * reactive) and the store (memory or redis) are chosen by properties on the command line.
 */
@SpringBootApplication
public class HttpBenchApplication {

  /** The work every handler does: count the request, answer a small JSON body. */
  static final AtomicLong SENT = new AtomicLong();

  public static void main(String[] args) {
    SpringApplication.run(HttpBenchApplication.class, args);
  }

  static String answer(String body) {
    return "{\"id\":" + SENT.incrementAndGet() + ",\"bytes\":" + body.length() + "}";
  }

  static ResponseEntity<String> response(RedisFloor.Answer answer) {
    ResponseEntity.BodyBuilder response = ResponseEntity.status(answer.status());
    if (answer.replayed()) {
      response.header("Idempotent-Replayed", "true");
    }
    return response.contentType(MediaType.APPLICATION_JSON).body(answer.body());
  }

  @Bean
  RedisFloor redisFloor(KeyStore store) {
    return new RedisFloor(store);
  }

  /** Opens the floor's connection before the first request (not on an event loop). */
  @Bean
  ApplicationListener<ApplicationReadyEvent> redisFloorOpener(RedisFloor floor) {
    return event -> floor.openIfRedis();
  }

  /** The two handlers: the same work, with and without the guard. */
  @RestController
  static class NotifyController {

    @PostMapping(path = "/plain", produces = MediaType.APPLICATION_JSON_VALUE)
    public String plain(@RequestBody String body) {
      return answer(body);
    }

    @IdempotentEndpoint
    @PostMapping(path = "/guarded", produces = MediaType.APPLICATION_JSON_VALUE)
    public String guarded(@RequestBody String body) {
      return answer(body);
    }
  }

  /** {@code /floor} on Spring MVC: the commands waited for on the request thread. */
  @RestController
  @ConditionalOnWebApplication(type = Type.SERVLET)
  static class ServletFloorController {

    private final RedisFloor floor;

    ServletFloorController(RedisFloor floor) {
      this.floor = floor;
    }

    @PostMapping(path = "/floor", produces = MediaType.APPLICATION_JSON_VALUE)
    public ResponseEntity<String> floor(
        @RequestHeader("Idempotency-Key") String key, @RequestBody String body) {
      return response(floor.callBlocking(key, () -> answer(body)));
    }
  }

  /** {@code /floor} on WebFlux: each step where Lettuce completes the command before it. */
  @RestController
  @ConditionalOnWebApplication(type = Type.REACTIVE)
  static class ReactiveFloorController {

    private final RedisFloor floor;

    ReactiveFloorController(RedisFloor floor) {
      this.floor = floor;
    }

    @PostMapping(path = "/floor", produces = MediaType.APPLICATION_JSON_VALUE)
    public Mono<ResponseEntity<String>> floor(
        @RequestHeader("Idempotency-Key") String key, @RequestBody String body) {
      return Mono.fromFuture(floor.callAsync(key, () -> answer(body)))
          .map(HttpBenchApplication::response);
    }
  }
}
