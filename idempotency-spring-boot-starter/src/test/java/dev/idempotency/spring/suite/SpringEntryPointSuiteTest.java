package dev.idempotency.spring.suite;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;

/**
 * SPEC 16 for the starter's entry points reachable over HTTP: {@code @IdempotentEndpoint} blocking
 * and async, and {@code @Idempotent} methods blocking and async (called by a plain controller,
 * their refusals answered by {@code IdempotencyExceptionHandler}), in a real Boot application over
 * real HTTP. Each hazard is one test, run on every entry point, as {@code EntryPointSuiteTest} does
 * for the plain-Java ones and {@code ListenerContract} for each broker's listeners:
 *
 * <ul>
 *   <li>the client gives up while the send runs: the send goes on and its outcome is recorded;
 *       repeats meanwhile are answered 409, and afterwards replay it (one provider send);
 *   <li>a store that is down at the call: 503, nothing sent; once it answers again, one send;
 *   <li>a key that is not safe (over the length limit): refused, nothing sent, the store never
 *       asked.
 * </ul>
 */
@SpringBootTest(
    classes = SuiteApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
    properties = {
      "idempotency.in-flight-wait=50ms",
      "spring.main.banner-mode=off",
      "logging.level.dev.idempotency=WARN"
    })
class SpringEntryPointSuiteTest {

  /** An entry point: the path that reaches it. */
  enum EntryPoint {
    ENDPOINT("/suite/endpoint"),
    ENDPOINT_ASYNC("/suite/endpoint-async"),
    METHOD("/suite/method"),
    METHOD_ASYNC("/suite/method-async");

    final String path;

    EntryPoint(String path) {
      this.path = path;
    }
  }

  private static final HttpClient HTTP =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

  @LocalServerPort int port;
  @Autowired SuiteApplication.Provider provider;
  @Autowired SwitchableKeyStore store;

  @AfterEach
  void restore() {
    provider.stopHolding();
    store.down.set(false);
  }

  private HttpResponse<String> post(EntryPoint entry, String key, Duration timeout)
      throws Exception {
    HttpRequest request =
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + entry.path))
            .timeout(timeout)
            .header("Content-Type", "application/json")
            .header("Idempotency-Key", key)
            .POST(HttpRequest.BodyPublishers.ofString("{\"to\":\"+15550100\"}"))
            .build();
    return HTTP.send(request, HttpResponse.BodyHandlers.ofString());
  }

  private HttpResponse<String> post(EntryPoint entry, String key) throws Exception {
    return post(entry, key, Duration.ofSeconds(60));
  }

  private static String newKey(EntryPoint entry) {
    return entry.name().toLowerCase() + "-" + UUID.randomUUID();
  }

  private static void await(String what, BooleanSupplier condition) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("timed out after 60 s waiting for " + what);
      }
      Thread.sleep(20);
    }
  }

  @ParameterizedTest
  @EnumSource(EntryPoint.class)
  void aClientThatGivesUpMidSendLeavesTheSendToFinishAndItsRepeatReplaysIt(EntryPoint entry)
      throws Exception {
    String key = newKey(entry);
    CountDownLatch release = new CountDownLatch(1);
    CountDownLatch started = provider.hold(release);
    CompletableFuture<Throwable> gaveUp =
        CompletableFuture.supplyAsync(
            () -> {
              try {
                post(entry, key, Duration.ofMillis(500));
                return null;
              } catch (Exception e) {
                return e;
              }
            });
    assertThat(started.await(30, TimeUnit.SECONDS)).as("the send started").isTrue();
    assertThat(gaveUp.get(30, TimeUnit.SECONDS)).isInstanceOf(HttpTimeoutException.class);

    HttpResponse<String> meanwhile = post(entry, key);
    assertThat(meanwhile.statusCode()).as(meanwhile.body()).isEqualTo(409);
    assertThat(meanwhile.headers().firstValue("Retry-After")).isPresent();

    release.countDown();
    await("the send", () -> provider.sends(key) == 1);
    HttpResponse<String> repeat = awaitAnswer(entry, key);
    assertThat(repeat.statusCode()).as(repeat.body()).isEqualTo(200);
    assertThat(repeat.body()).contains("sent-" + key + "-1");
    assertThat(provider.sends(key)).as("one provider send").isEqualTo(1);
  }

  /** The first answer that is not 409: the outcome is written a moment after the send. */
  private HttpResponse<String> awaitAnswer(EntryPoint entry, String key) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (true) {
      HttpResponse<String> response = post(entry, key);
      if (response.statusCode() != 409 || System.nanoTime() > deadline) {
        return response;
      }
      Thread.sleep(20);
    }
  }

  @ParameterizedTest
  @EnumSource(EntryPoint.class)
  void aStoreThatIsDownAnswers503AndSendsNothingThenOnceItAnswersSendsOnce(EntryPoint entry)
      throws Exception {
    String key = newKey(entry);
    store.down.set(true);
    HttpResponse<String> down = post(entry, key);
    assertThat(down.statusCode()).as(down.body()).isEqualTo(503);
    assertThat(provider.sends(key)).isZero();

    store.down.set(false);
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    HttpResponse<String> up = post(entry, key);
    while (up.statusCode() == 503 && System.nanoTime() < deadline) {
      Thread.sleep(50); // the guard's probe finds the store back
      up = post(entry, key);
    }
    assertThat(up.statusCode()).as(up.body()).isEqualTo(200);
    assertThat(provider.sends(key)).isEqualTo(1);
    HttpResponse<String> replay = post(entry, key);
    assertThat(replay.body()).isEqualTo(up.body());
    assertThat(provider.sends(key)).as("the repeat replays").isEqualTo(1);
  }

  @ParameterizedTest
  @EnumSource(EntryPoint.class)
  void aKeyThatIsNotSafeIsRefusedClearlyWithoutAskingTheStore(EntryPoint entry) throws Exception {
    String key = "k".repeat(2000);
    int claimsBefore = store.claims.get();
    HttpResponse<String> refused = post(entry, key);
    assertThat(refused.statusCode()).as(refused.body()).isEqualTo(400);
    assertThat(refused.body()).containsIgnoringCase("key");
    assertThat(provider.sends(key)).isZero();
    assertThat(store.claims.get()).as("the store never asked").isEqualTo(claimsBefore);
  }
}
