package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.testservers.Poll;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;

/**
 * probeC, of fixreplaced (46b6b442): the lease lapsing while a replaced outcome is followed. A
 * {@code Callable} returns a {@code CompletableFuture} whose stage sends, then holds for more than
 * two leases (lease 2 s) before it answers; the application's async interceptor ({@link
 * MvcReplacedOutcomeShapesProbeTest.RegisteringFilter}, failing in {@code postProcess} on the key's
 * first request) replaces that outcome, so the starter follows the stage on its own pool ({@code
 * AsyncWork.followReplacedOutcome}). While it is followed, retries every 250 ms must never run the
 * work again (409, never a second send, SPEC 1); once it ended, the retry gets the stage's {@code
 * 201 sent-1} replayed. One application on a real Redis; about 7 s: tagged extended. Passes on Boot
 * 3.5 (7.5 s) and 4.0 (7.3 s) at 7340e92a.
 */
class MvcReplacedOutcomeLeaseProbeTest extends MvcProbeApplication {

  private static final String PATH = "/shapes/lease/later-held";

  MvcReplacedOutcomeLeaseProbeTest() {
    super(
        LeaseApplication.class,
        "spring.mvc.async.request-timeout=60s",
        "idempotency.lease=2s",
        "idempotency.close-grace-period=5s");
  }

  @Override
  public int runs() {
    return Lease.entered.get();
  }

  @Tag("extended")
  @Test
  void aFollowedLaterStageOutlivingTheLeaseIsNeverRunAgain() throws Exception {
    String key = EndpointClient.newKey();
    CountDownLatch release = new CountDownLatch(1);
    Lease.release = release;
    List<String> whileHeld = new ArrayList<>();
    String first;
    try {
      HttpResponse<byte[]> answer = post(PATH, key, "{}");
      first = MvcProbes.replayed(answer);
      Poll.within(Duration.ofSeconds(20))
          .until("the stage sent: " + first, () -> Lease.sendsOf(key) >= 1);
      long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(5_000);
      while (System.nanoTime() < until) {
        HttpResponse<byte[]> retry = post(PATH, key, "{}");
        whileHeld.add(String.valueOf(retry.statusCode()));
        Thread.sleep(250);
      }
    } finally {
      release.countDown();
    }
    HttpResponse<byte[]> last = MvcProbes.retryUntilAnswered(this, PATH, key);
    String seen =
        String.format(
            "first %s; retries while held %s; last %s; interceptor failed on %s; sends %d",
            first,
            whileHeld,
            MvcProbes.replayed(last),
            MvcReplacedOutcomeShapesProbeTest.Shapes.failedOn.get(key),
            Lease.sendsOf(key));
    assertThat(MvcReplacedOutcomeShapesProbeTest.Shapes.failedOn.get(key)).as(seen).isNotNull();
    assertThat(whileHeld).as("retries while the stage is followed: " + seen).containsOnly("409");
    assertThat(Lease.sendsOf(key)).as("sends: " + seen).isEqualTo(1);
    assertThat(MvcProbes.replayed(last)).as(seen).isEqualTo("201 replayed=true sent-1");
  }

  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(Lease.class)
  static class LeaseApplication {
    @Bean
    FilterRegistrationBean<MvcReplacedOutcomeShapesProbeTest.RegisteringFilter>
        probeCInterceptorFilter() {
      FilterRegistrationBean<MvcReplacedOutcomeShapesProbeTest.RegisteringFilter> registration =
          new FilterRegistrationBean<>(new MvcReplacedOutcomeShapesProbeTest.RegisteringFilter());
      registration.setOrder(-100);
      return registration;
    }
  }

  @RestController
  static class Lease {
    static final AtomicInteger entered = new AtomicInteger();
    static final Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();
    static volatile CountDownLatch release = new CountDownLatch(0);

    static int sendsOf(String key) {
      AtomicInteger n = sends.get(key);
      return n == null ? 0 : n.get();
    }

    /** The stage sends, then holds (30 s at most) until the test releases it. */
    @PostMapping(PATH)
    @IdempotentEndpoint
    public Callable<CompletableFuture<ResponseEntity<String>>> laterHeld(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      CountDownLatch held = release;
      return () ->
          CompletableFuture.supplyAsync(
              () -> {
                int n = sends.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
                try {
                  held.await(30, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                  Thread.currentThread().interrupt();
                }
                return ResponseEntity.status(201).body("sent-" + n);
              });
    }
  }
}
