package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.tck.ForwardingKeyStore;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * An {@code executeAsync} whose claim answers after the call returned, and whose async executor
 * then fails to take the next step with something other than a refusal (fluxhang's finding, from
 * reading: an {@code OutOfMemoryError: unable to create native thread} while a pool adds a worker).
 * Before the fix, {@code Stages.continueOrReject} caught only {@code RejectedExecutionException}:
 * the error vanished into the claim's completion, the caller's stage never completed and the key
 * stayed claimed with nothing sent. Now such a failure is a refusal: the claim is released and the
 * caller fails with the executor's error as the cause.
 */
class FailingStepExecutorTest {

  final HeldClaimFixture fixture = new HeldClaimFixture();

  /** A blocking store whose claim answers only when the test lets it. */
  final ForwardingKeyStore slow =
      new ForwardingKeyStore(fixture.memory) {
        @Override
        public ClaimResult claim(ClaimRequest request) {
          fixture.holdClaim();
          return delegate.claim(request);
        }
      };

  /** An executor that cannot start a thread. */
  final Executor failing =
      task -> {
        throw new OutOfMemoryError("unable to create native thread (the test's executor)");
      };

  @AfterEach
  void stop() throws InterruptedException {
    fixture.stop();
  }

  @Test
  void anExecutorThatFailsToTakeTheStepReleasesTheClaimAndFailsTheCaller() throws Exception {
    try (IdempotencyGuard guard = fixture.guard(slow, failing)) {
      String key = HeldClaimFixture.newKey("failing-step");
      CompletableFuture<String> caller = fixture.callHeldAtItsClaim(guard, key);
      fixture.letClaimAnswer();

      assertThatThrownBy(() -> caller.get(20, TimeUnit.SECONDS))
          .as("the caller's stage completes (it never did: the executor's error was swallowed)")
          .isInstanceOf(ExecutionException.class)
          .hasRootCauseInstanceOf(OutOfMemoryError.class);
      assertThat(fixture.sends).hasValue(0);
      fixture.awaitReleased(
          key, "the granted claim whose next step the executor failed to take to be released");
    }
  }
}
