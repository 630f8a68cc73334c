package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.tck.ForwardingKeyStore;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Suspicion 3 (suspects; SPEC 16): {@code UnsentClaims.close()} stops its thread with {@code
 * shutdownNow}, while a take-back of a claim whose answer was lost is in the store. The interrupt
 * hits only the guard's own take-back thread, never the application's threads (the one that called
 * {@code execute}, the one that calls {@code close()}), and {@code close()} does not wait for the
 * store. The key stays claimed, nothing sent, until its lease ends (documented, with a WARN, as
 * after a crash). In-memory store behind a forwarding store whose claim is applied and then fails
 * (a lost answer), and whose take-back waits, bounded, for the test. Passes on af14534: refuted.
 */
class CloseDuringTakeBackTest {

  static final Duration TTL = Duration.ofHours(1);

  final CountDownLatch takingBack = new CountDownLatch(1);
  final CountDownLatch letTakeBack = new CountDownLatch(1);
  final AtomicReference<Thread> takeBackThread = new AtomicReference<>();
  final AtomicBoolean takeBackInterrupted = new AtomicBoolean();

  final ForwardingKeyStore store =
      new ForwardingKeyStore(InMemoryKeyStore.builder().build()) {
        @Override
        public ClaimResult claim(ClaimRequest request) {
          delegate.claim(request); // applied; its answer lost on the way back
          throw new KeyStoreException("the claim's answer was lost", null);
        }

        @Override
        public boolean takeBack(String keyId, String ownerToken, java.time.Instant now) {
          takeBackThread.set(Thread.currentThread());
          takingBack.countDown();
          try {
            letTakeBack.await(30, TimeUnit.SECONDS);
          } catch (InterruptedException e) {
            takeBackInterrupted.set(true);
            Thread.currentThread().interrupt();
            throw new KeyStoreException("interrupted", e);
          }
          return delegate.takeBack(keyId, ownerToken, now);
        }
      };

  final IdempotencyGuard guard =
      IdempotencyGuard.builder().store(store).inFlightWait(Duration.ZERO).build();

  @AfterEach
  void release() {
    letTakeBack.countDown();
    guard.close();
  }

  @Test
  void closeDuringATakeBackInterruptsNoApplicationThread() throws Exception {
    String key = "close-during-take-back:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    assertThatThrownBy(() -> guard.execute(key, TTL, ctx -> "n_" + sends.incrementAndGet()))
        .isInstanceOf(KeyStoreException.class);
    assertThat(takingBack.await(30, TimeUnit.SECONDS))
        .as("the take-back reached the store")
        .isTrue();
    assertThat(takeBackThread.get()).as("taken back on a thread of the guard's").isNotNull();
    assertThat(takeBackThread.get()).isNotSameAs(Thread.currentThread());

    long start = System.nanoTime();
    guard.close();
    long closeMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);

    assertThat(Thread.currentThread().isInterrupted())
        .as("the application's thread (it called execute and close) is not interrupted")
        .isFalse();
    assertThat(closeMillis)
        .as("close() does not wait for the store's take-back")
        .isLessThan(20_000);
    assertThat(sends).as("nothing sent").hasValue(0);
  }
}
