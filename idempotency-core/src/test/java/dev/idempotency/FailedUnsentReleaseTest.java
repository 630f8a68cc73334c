package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.tck.ForwardingKeyStore;
import java.time.Instant;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Probe (issue 37, fixclose x fixstall; probeD): an {@code executeAsync} claim the store granted,
 * whose next step the application's async executor (saturated, abort policy) refuses while the
 * guard is open, is released at once by the thread that holds it ({@code SendLease.releaseUnsent}).
 * If that one release fails (a store hiccup), nothing tries again: unlike a claim that failed after
 * it reached the store, it is not handed to the background take-back ({@code UnsentClaims}), so the
 * key stays {@code IN_PROGRESS} with nothing sent for the whole lease.
 */
class FailedUnsentReleaseTest {

  final HeldClaimFixture fixture = new HeldClaimFixture();
  final AtomicInteger releases = new AtomicInteger();

  /** A blocking store whose claim waits for the test, and whose first release fails. */
  final ForwardingKeyStore losing =
      new ForwardingKeyStore(fixture.memory) {
        @Override
        public ClaimResult claim(ClaimRequest request) {
          fixture.holdClaim();
          return delegate.claim(request);
        }

        @Override
        public boolean takeBack(String keyId, String ownerToken, Instant now) {
          if (releases.incrementAndGet() == 1) {
            throw new KeyStoreException("the release failed (a store hiccup)", null);
          }
          return delegate.takeBack(keyId, ownerToken, now);
        }
      };

  @AfterEach
  void stop() throws InterruptedException {
    fixture.stop();
  }

  @Test
  void aGrantedClaimWhoseReleaseFailedOnceAfterARefusedStepIsNotHeld() throws Exception {
    try (IdempotencyGuard guard = fixture.guard(losing, fixture.steps)) {
      String key = HeldClaimFixture.newKey("release-failed");
      CompletableFuture<String> caller = fixture.callHeldAtItsClaim(guard, key);
      fixture.fillSteps();
      fixture.letClaimAnswer();

      assertThatThrownBy(() -> caller.get(30, TimeUnit.SECONDS))
          .isInstanceOf(ExecutionException.class)
          .hasCauseInstanceOf(RejectedExecutionException.class);
      assertThat(fixture.sends).hasValue(0);
      fixture.letStepsGoOn();

      // a take-back goes at once; the clock stands still, so no lease runs out meanwhile
      fixture.awaitReleased(
          key,
          "the record of a granted claim whose next step was refused and whose release failed"
              + " once to be released (nothing sent; lease 30 s)");
    }
  }
}
