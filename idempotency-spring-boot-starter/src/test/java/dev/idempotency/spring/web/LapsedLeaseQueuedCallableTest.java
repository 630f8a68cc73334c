package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.KeyStoreException;
import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.KeyStore;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;

/**
 * Issue 37 (SPEC 1 and 16), real HTTP on Tomcat: a {@code Callable} endpoint whose work waits in
 * Spring MVC's async executor (one thread, held by another request) while its key's lease lapses,
 * because the store refuses the renewals (as a store partitioned from this instance would). Another
 * request with the key then claims it and queues its own work. A send must never start on a lapsed
 * lease (SPEC 16): at most one provider send for the key, and none by the first request.
 */
@SpringBootTest(
    classes = LapsedLeaseQueuedCallableTest.LapseApp.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
    properties = {
      "idempotency.lease=2s",
      "spring.mvc.async.request-timeout=120s",
      "spring.task.execution.pool.core-size=1",
      "spring.task.execution.pool.max-size=1"
    })
class LapsedLeaseQueuedCallableTest {

  private static final HttpClient HTTP =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

  @LocalServerPort int port;
  @Autowired LapseState state;
  @Autowired RenewalRefusingStore store;

  @Test
  void workQueuedWhileItsLeaseLapsedNeverSends() throws Exception {
    CountDownLatch release = new CountDownLatch(1);
    state.release = release;
    CompletableFuture<HttpResponse<byte[]>> blocking = post("/lapse/block", null, "block");
    assertThat(state.blockStarted.await(30, TimeUnit.SECONDS)).isTrue();

    String key = "\"" + UUID.randomUUID() + "\"";
    CompletableFuture<HttpResponse<byte[]>> first;
    CompletableFuture<HttpResponse<byte[]>> second = null;
    try {
      store.refuseRenewals.set(true);
      first = post("/lapse/send", key, "first");
      awaitEntered(1, "the first request claimed the key; its work waits in the queue");

      // bounded polling: repeats get 409 while the first lease lives; one claims once it lapsed
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      while (state.handlerEntered.get() < 2 && System.nanoTime() < deadline) {
        CompletableFuture<HttpResponse<byte[]>> repeat = post("/lapse/send", key, "second");
        while (!repeat.isDone() && state.handlerEntered.get() < 2) {
          Thread.onSpinWait();
          TimeUnit.MILLISECONDS.sleep(20);
        }
        if (state.handlerEntered.get() >= 2) {
          second = repeat;
        }
      }
      assertThat(state.handlerEntered.get())
          .as("a repeat claimed the key once the first lease lapsed")
          .isEqualTo(2);
    } finally {
      release.countDown();
    }
    blocking.get(60, TimeUnit.SECONDS);
    HttpResponse<byte[]> firstAnswer = first.get(60, TimeUnit.SECONDS);
    HttpResponse<byte[]> secondAnswer = second.get(60, TimeUnit.SECONDS);

    assertThat(state.sentBy)
        .as(
            "at most one send, none on the lapsed lease (answers: first %s, second %s)",
            text(firstAnswer), text(secondAnswer))
        .doesNotContain("first")
        .hasSizeLessThanOrEqualTo(1);
  }

  private void awaitEntered(int count, String what) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (state.handlerEntered.get() < count && System.nanoTime() < deadline) {
      TimeUnit.MILLISECONDS.sleep(20);
    }
    assertThat(state.handlerEntered.get()).as(what).isGreaterThanOrEqualTo(count);
  }

  private CompletableFuture<HttpResponse<byte[]>> post(String path, String key, String label) {
    HttpRequest.Builder request =
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
            .timeout(Duration.ofSeconds(120))
            .header("Content-Type", "application/json")
            .header("X-Label", label)
            .POST(HttpRequest.BodyPublishers.ofString("{}"));
    if (key != null) {
      request.header("Idempotency-Key", key);
    }
    return HTTP.sendAsync(request.build(), HttpResponse.BodyHandlers.ofByteArray());
  }

  private static String text(HttpResponse<byte[]> response) {
    return response.statusCode() + " " + new String(response.body());
  }

  @SpringBootConfiguration
  @EnableAutoConfiguration
  @Import({LapseController.class, LapseState.class})
  static class LapseApp {
    @Bean
    RenewalRefusingStore renewalRefusingStore() {
      return new RenewalRefusingStore();
    }
  }

  /** The real in-memory store, whose renewals a test can make fail. */
  static final class RenewalRefusingStore implements KeyStore {
    final AtomicBoolean refuseRenewals = new AtomicBoolean();
    private final KeyStore delegate = InMemoryKeyStore.builder().build();

    @Override
    public ClaimResult claim(ClaimRequest request) {
      return delegate.claim(request);
    }

    @Override
    public List<ClaimResult> claimAll(List<ClaimRequest> requests) {
      return delegate.claimAll(requests);
    }

    @Override
    public boolean complete(CompleteRequest request) {
      return delegate.complete(request);
    }

    @Override
    public List<Boolean> completeAll(List<CompleteRequest> requests) {
      return delegate.completeAll(requests);
    }

    @Override
    public boolean release(String keyId, String ownerToken) {
      return delegate.release(keyId, ownerToken);
    }

    @Override
    public boolean extend(ExtendRequest request) {
      if (refuseRenewals.get()) {
        throw new KeyStoreException("renewal refused (test)", null);
      }
      return delegate.extend(request);
    }

    @Override
    public int maxBatchSize() {
      return delegate.maxBatchSize();
    }
  }

  static class LapseState {
    final CountDownLatch blockStarted = new CountDownLatch(1);
    volatile CountDownLatch release = new CountDownLatch(1);
    final AtomicInteger handlerEntered = new AtomicInteger();
    final List<String> sentBy = new CopyOnWriteArrayList<>();
  }

  @RestController
  static class LapseController {
    private final LapseState state;

    LapseController(LapseState state) {
      this.state = state;
    }

    /** Not guarded: holds the async executor's only thread until the test releases it. */
    @PostMapping("/lapse/block")
    public Callable<String> block() {
      CountDownLatch release = state.release;
      return () -> {
        state.blockStarted.countDown();
        release.await(120, TimeUnit.SECONDS);
        return "done";
      };
    }

    @PostMapping("/lapse/send")
    @IdempotentEndpoint
    public Callable<ResponseEntity<Map<String, Object>>> send(
        @RequestHeader("X-Label") String label) {
      state.handlerEntered.incrementAndGet();
      return () -> {
        state.sentBy.add(label);
        return ResponseEntity.status(201).body(Map.of("sentBy", label));
      };
    }
  }
}
