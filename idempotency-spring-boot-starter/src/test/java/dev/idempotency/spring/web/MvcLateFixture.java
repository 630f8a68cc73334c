package dev.idempotency.spring.web;

import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Arrays;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeEach;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.context.TestPropertySource;

/**
 * What the tests of a Spring MVC result that comes after the container async timeout share: a
 * timeout of 1 s, a handler held (bounded) while its request carries {@link #HOLD} until the test
 * opens {@link #gate}, and a retry repeated while the key is still in progress. A subclass names
 * its application with {@code @SpringBootTest(classes = ..., webEnvironment = RANDOM_PORT)}.
 */
@TestPropertySource(
    properties = {
      "idempotency.store=memory",
      "spring.mvc.async.request-timeout=1s",
      "idempotency.close-grace-period=1s"
    })
abstract class MvcLateFixture implements EndpointClient {

  static final String HOLD = "X-Probe-Hold";

  /** Holds a handler's send while its request carries {@link #HOLD}; closed before each test. */
  static volatile CountDownLatch gate = new CountDownLatch(1);

  @LocalServerPort int port;

  @Override
  public int port() {
    return port;
  }

  @BeforeEach
  void closeGate() {
    gate = new CountDownLatch(1);
  }

  /** Waits (at most 20 s) until the test opens the gate. */
  static void awaitGate() {
    try {
      gate.await(20, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /**
   * Posts a held request, which the container async timeout answers, then opens the gate so that
   * the handler's work ends after its request did.
   */
  HttpResponse<byte[]> postTimedOut(String path, String key, String... headers) throws Exception {
    try {
      return post(
          path,
          key,
          "{}",
          Stream.concat(Stream.of(HOLD, "true"), Arrays.stream(headers)).toArray(String[]::new));
    } finally {
      gate.countDown();
    }
  }

  /** Posts the retry again while {@link #inProgress} says the first call still holds the key. */
  HttpResponse<byte[]> retry(String path, String key, String... headers) throws Exception {
    HttpResponse<byte[]> retry;
    long deadline = System.nanoTime() + Duration.ofSeconds(15).toNanos();
    do {
      retry = post(path, key, "{}", headers);
    } while (inProgress(retry) && System.nanoTime() < deadline);
    return retry;
  }

  /** Whether an answer says the key is still in progress: a 409. */
  boolean inProgress(HttpResponse<byte[]> answer) {
    return answer.statusCode() == 409;
  }

  /** The provider accepted the message, then the application refuses the rest: mapped to 422. */
  static final class RecipientBlocked extends RuntimeException {
    private static final long serialVersionUID = 1L;

    RecipientBlocked() {
      super("recipient blocked after the send", null, false, false);
    }
  }
}
