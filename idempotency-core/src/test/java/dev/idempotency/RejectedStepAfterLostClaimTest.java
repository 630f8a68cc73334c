package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.tck.ForwardingKeyStore;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Probe (issue 37, fixstall x fixclose; probeD): an {@code executeAsync} claim on a blocking store
 * that the store applied though its answer was lost, while the application's async executor (a
 * saturated pool with the default abort policy) refuses the call's next step. The refusal path of
 * {@code Stages.continueOrReject} (AsyncGuardedCall#attempt) releases only a granted claim and
 * never reaches {@code CallSupport.decide}, so the lost claim is not taken back: the key stays
 * {@code IN_PROGRESS} under a token nobody renews, with nothing sent, for a lease (and, in strict
 * mode, answers "outcome unknown" after it). The guard stays open throughout.
 */
class RejectedStepAfterLostClaimTest {

  final HeldClaimFixture fixture = new HeldClaimFixture();

  /** A blocking store whose claim waits for the test, is applied, and loses its answer. */
  final ForwardingKeyStore losing =
      new ForwardingKeyStore(fixture.memory) {
        @Override
        public ClaimResult claim(ClaimRequest request) {
          fixture.holdClaim();
          delegate.claim(request);
          throw new KeyStoreException("the claim's answer was lost", null);
        }
      };

  @AfterEach
  void stop() throws InterruptedException {
    fixture.stop();
  }

  @Test
  void aLostClaimWhoseNextStepIsRefusedIsTakenBack() throws Exception {
    try (IdempotencyGuard guard = fixture.guard(losing, fixture.steps)) {
      String key = HeldClaimFixture.newKey("rejected-lost");
      CompletableFuture<String> caller = fixture.callHeldAtItsClaim(guard, key);
      fixture.fillSteps();
      fixture.letClaimAnswer();

      assertThatThrownBy(() -> caller.get(30, TimeUnit.SECONDS))
          .isInstanceOf(ExecutionException.class);
      assertThat(fixture.sends).hasValue(0);
      fixture.letStepsGoOn();

      // a take-back goes at once; the clock stands still, so no lease runs out meanwhile
      fixture.awaitReleased(
          key,
          "the record of a claim whose answer was lost and whose next step was refused to be"
              + " released (nothing sent; lease 30 s)");
    }
  }
}
