package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spi.StoredRecord;
import dev.idempotency.tck.ForwardingKeyStore;
import dev.idempotency.tck.MutableClock;
import java.time.Duration;
import java.time.Instant;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * Issue 37, the second path to a take-back: a claim granted as a takeover of a lapsed lease but
 * answered too late to send on ({@code SendLease.lateClaimRefused}) is given back at once on the
 * calling thread. It went through {@code KeyStore.release}, which deleted the taken-over record and
 * with it the trace of the first owner's attempt, whose send still ran: the next caller claimed
 * afresh as attempt 1. It now goes through {@code KeyStore.takeBack}, as {@code UnsentClaims} does:
 * the record stays at attempt 2 with its lease passed, and the next caller takes over as attempt 3.
 * In-memory store; the late answer is the guard's clock moved past the lease while the claim runs.
 */
class LateTakeoverClaimRefusedTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofSeconds(30);

  final MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final InMemoryKeyStore memory = InMemoryKeyStore.builder().build();
  final AtomicBoolean answerLate = new AtomicBoolean();

  /** Applies each claim at once; answers one of them a lease and a second later. */
  final ForwardingKeyStore late =
      new ForwardingKeyStore(memory) {
        @Override
        public ClaimResult claim(ClaimRequest request) {
          ClaimResult result = delegate.claim(request);
          if (answerLate.getAndSet(false)) {
            clock.advance(LEASE.plusSeconds(1));
          }
          return result;
        }
      };

  IdempotencyGuard guard(KeyStore store) {
    return IdempotencyGuard.builder()
        .store(store)
        .clock(clock)
        .lease(LEASE)
        .leaseRenewal(false)
        .inFlightWait(Duration.ZERO)
        .closeGracePeriod(Duration.ofSeconds(5))
        .build();
  }

  @Test
  void aTakeoverAnsweredTooLateToSendOnKeepsItsAttemptForTheNextCaller() throws Exception {
    CountDownLatch ownerMayFinish = new CountDownLatch(1);
    try (IdempotencyGuard owner = guard(memory);
        IdempotencyGuard guard = guard(late)) {
      String key = "late-takeover:" + UUID.randomUUID();
      AtomicInteger sends = new AtomicInteger();
      CompletableFuture<String> first =
          StalledOwners.sending(owner, key, TTL, sends, ownerMayFinish);
      clock.advance(LEASE.plusSeconds(1)); // the owner stalled past its lease

      answerLate.set(true); // the retry takes over (attempt 2), answered past that lease too
      assertThatThrownBy(() -> guard.execute(key, TTL, ctx -> "retry-" + sends.incrementAndGet()))
          .isInstanceOf(KeyStoreException.class)
          .hasMessageContaining("nothing was sent");
      Optional<StoredRecord> left = memory.find(Digests.keyId(key), clock.instant());

      AtomicInteger nextAttempt = new AtomicInteger();
      String next =
          guard.execute(
              key,
              TTL,
              ctx -> {
                nextAttempt.set(ctx.attempt());
                return "next-" + sends.incrementAndGet();
              });
      ownerMayFinish.countDown();
      first.get(30, TimeUnit.SECONDS);

      assertThat(left).as("the taken-over record after the late claim was given back").isPresent();
      assertThat(left.get().state()).isEqualTo(RecordState.IN_PROGRESS);
      assertThat(left.get().attempt()).isEqualTo(2);
      assertThat(left.get().leaseDeadline()).isBeforeOrEqualTo(clock.instant());
      assertThat(nextAttempt)
          .as("attempt() of the next send (SPEC 9: counts takeovers)")
          .hasValue(3);
      assertThat(next).isEqualTo("next-2");
    } finally {
      ownerMayFinish.countDown();
    }
  }
}
