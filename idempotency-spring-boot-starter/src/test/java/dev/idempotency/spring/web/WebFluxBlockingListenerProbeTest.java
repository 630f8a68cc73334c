package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyEvent;
import dev.idempotency.IdempotencyListener;
import dev.idempotency.spring.reactive.BlockingCalls;
import java.net.http.HttpResponse;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * probeY: an {@link IdempotencyListener} that blocks (docs/spring-boot.md: on Redis and in memory
 * it runs on the request's event loop since 673470c, and must not block). It blocks on the first
 * request's CLAIMED event for 4.5 s, past the 3 s lease, before the send starts; a retry of the key
 * comes meanwhile on another connection. The promise holds whatever the listener does: one run of
 * the handler, and the retry ends with the answer of that run. In memory; the Redis subclass on the
 * embedded Redis.
 */
class WebFluxBlockingListenerProbeTest extends WebFluxProbeSupport {

  static final AtomicBoolean armed = new AtomicBoolean();
  static volatile CountDownLatch blocking = new CountDownLatch(1);
  static final List<String> events = new CopyOnWriteArrayList<>();

  @Configuration(proxyBeanMethods = false)
  static class BlockingListener {
    @Bean
    IdempotencyListener blockingListener() {
      return event -> {
        events.add(event.type() + "#" + event.attempt() + "@" + Thread.currentThread().getName());
        if (event.type() == IdempotencyEvent.Type.CLAIMED && armed.compareAndSet(true, false)) {
          blocking.countDown();
          try {
            Thread.sleep(4_500); // the listener's blocking call: longer than the lease
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
        }
      };
    }
  }

  @BeforeAll
  static void start() {
    start(Map.of("idempotency.store", "memory"), BlockingListener.class);
  }

  /**
   * The listener's sleep on the event loop is this probe's own doing (an application's listener
   * that blocks), remembered as a blocking call of the SDK because its stack runs through
   * dev.idempotency: taken out here, before the check every test has, and any other blocking call
   * of the SDK still fails the test.
   */
  @AfterEach
  void onlyTheListenerBlocked() {
    assertThat(BlockingCalls.takeFromTheSdk())
        .as("blocking calls of the SDK other than the listener's sleep")
        .allSatisfy(
            call ->
                assertThat(call.getStackTrace())
                    .anyMatch(
                        frame ->
                            frame.getClassName().startsWith(BlockingListener.class.getName())));
  }

  @Test
  void aListenerBlockingPastTheLeaseBeforeTheSendStillRunsTheHandlerOnce() throws Exception {
    String id = UUID.randomUUID().toString();
    String key = UUID.randomUUID().toString();
    String path = "/delayed/" + id + "/50";
    blocking = new CountDownLatch(1);
    events.clear();
    armed.set(true);
    CompletableFuture<HttpResponse<String>> first =
        CLIENT.sendAsync(post(path, key), HttpResponse.BodyHandlers.ofString());
    assertThat(blocking.await(WAIT_SECONDS, TimeUnit.SECONDS)).isTrue();
    HttpResponse<String> retry = retry(path, key);
    HttpResponse<String> answered = first.get(WAIT_SECONDS, TimeUnit.SECONDS);
    HttpResponse<String> again = retry(path, key);

    String seen =
        "first "
            + answered.statusCode()
            + " "
            + answered.body()
            + "; retry "
            + retry.statusCode()
            + " "
            + retry.body()
            + "; events "
            + events;
    assertThat(Probes.runs(id).get()).as("one run for one key: %s", seen).isEqualTo(1);
    assertThat(retry.statusCode()).as(seen).isEqualTo(200);
    assertThat(again.statusCode()).as(seen).isEqualTo(200);
    assertThat(replayed(again)).as(seen).isTrue();
    assertThat(again.body()).as(seen).isEqualTo(retry.body());
    if (answered.statusCode() == 200) {
      assertThat(answered.body()).as(seen).isEqualTo(retry.body());
    }
    System.out.println("probeY blocking listener: " + seen);
  }
}
