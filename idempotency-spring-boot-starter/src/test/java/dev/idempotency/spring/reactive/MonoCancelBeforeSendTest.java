package dev.idempotency.spring.reactive;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spi.StoredRecord;
import dev.idempotency.spring.reactive.ReactiveMailer.Sent;
import java.time.Duration;
import java.time.Instant;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.context.annotation.Bean;
import reactor.core.Disposable;
import reactor.core.publisher.SignalType;
import reactor.core.scheduler.Schedulers;

/**
 * {@code @Idempotent} on a {@code Mono} whose subscriber cancels while the claim is still with the
 * store, before the method started: the claim is released once the store answers, the method never
 * runs, and the next subscription sends. The application's store is the in-memory store behind a
 * gate that holds claims (on the guard's blocking-store executor, never on a non-blocking thread).
 */
@SpringBootTest(
    classes = {ReactiveTestApplication.class, MonoCancelBeforeSendTest.OwnStore.class},
    webEnvironment = SpringBootTest.WebEnvironment.NONE)
class MonoCancelBeforeSendTest {

  /** The in-memory store, whose claims wait while the gate is closed. */
  static final class GatedStore implements KeyStore {
    private final KeyStore delegate = InMemoryKeyStore.builder().build();
    private volatile CountDownLatch gate;
    private volatile CountDownLatch entered = new CountDownLatch(1);
    final AtomicInteger releases = new AtomicInteger();

    void close() {
      entered = new CountDownLatch(1);
      gate = new CountDownLatch(1);
    }

    void open() {
      CountDownLatch closed = gate;
      gate = null;
      if (closed != null) {
        closed.countDown();
      }
    }

    boolean awaitAHeldClaim() throws InterruptedException {
      return entered.await(30, TimeUnit.SECONDS);
    }

    @Override
    public ClaimResult claim(ClaimRequest request) {
      CountDownLatch closed = gate;
      if (closed != null) {
        entered.countDown();
        try {
          closed.await(30, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
      return delegate.claim(request);
    }

    @Override
    public boolean complete(CompleteRequest request) {
      return delegate.complete(request);
    }

    @Override
    public boolean release(String keyId, String ownerToken) {
      boolean released = delegate.release(keyId, ownerToken);
      if (released) {
        releases.incrementAndGet();
      }
      return released;
    }

    @Override
    public boolean extend(ExtendRequest request) {
      return delegate.extend(request);
    }

    @Override
    public Optional<StoredRecord> find(String keyId, Instant now) {
      return delegate.find(keyId, now);
    }
  }

  @TestConfiguration
  static class OwnStore {
    @Bean
    GatedStore gatedStore() {
      return new GatedStore();
    }
  }

  @Autowired ReactiveMailer mailer;
  @Autowired GatedStore store;
  @Autowired IdempotencyGuard guard;

  @BeforeAll
  static void blockHound() {
    BlockingCalls.install();
  }

  @AfterEach
  void nothingBlockedANonBlockingThread() {
    store.open();
    BlockingCalls.assertNoneFromTheSdk();
  }

  @Test
  void aSubscriberThatCancelsBeforeTheSendStartedReleasesTheClaimAndNothingIsSent()
      throws Exception {
    String order = UUID.randomUUID().toString();
    int before = mailer.runs();
    int releasesBefore = store.releases.get();
    store.close();

    // the cancel must reach the guarded Mono before the store answers: Reactor hands it upstream
    // on the parallel thread that made the subscription, which may not have finished making it
    // when the claim is already with the store (seen once in a combined run: the method then ran,
    // since it started before the cancel arrived). doFinally runs once the cancel went upstream
    CountDownLatch cancelled = new CountDownLatch(1);
    Disposable subscriber =
        mailer
            .send(order)
            .doFinally(
                signal -> {
                  if (signal == SignalType.CANCEL) {
                    cancelled.countDown();
                  }
                })
            .subscribeOn(Schedulers.parallel())
            .subscribe();
    assertThat(store.awaitAHeldClaim()).as("the claim is with the store").isTrue();
    subscriber.dispose();
    assertThat(cancelled.await(30, TimeUnit.SECONDS)).as("the cancel went upstream").isTrue();
    store.open();
    await(() -> store.releases.get() == releasesBefore + 1);

    assertThat(mailer.runs()).as("the method never ran").isEqualTo(before);
    assertThat(guard.find(IdempotencyKey.of("ReactiveMailer.send", order)))
        .as("no record is left")
        .isEmpty();
    Sent sent = mailer.send(order).subscribeOn(Schedulers.parallel()).block(Duration.ofSeconds(30));
    assertThat(sent.order()).isEqualTo(order);
    assertThat(mailer.runs()).as("the next subscription sent").isEqualTo(before + 1);
  }

  private static void await(BooleanSupplier condition) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (!condition.getAsBoolean()) {
      assertThat(System.nanoTime()).as("waited 30 s").isLessThan(deadline);
      Thread.sleep(10);
    }
  }
}
