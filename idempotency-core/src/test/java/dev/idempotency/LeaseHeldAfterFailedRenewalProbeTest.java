package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.ForwardingKeyStore;
import dev.idempotency.tck.MutableClock;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * probeJ (SPEC 1, no lost send): {@link SendContext#leaseHeld()} renews a claim that is due, and a
 * renewal the store fails (not refuses) marks the claim lost, so it answers {@code false} although
 * the record is still this call's and nobody else may send. A sender that then "sends nothing" as
 * the Javadoc says and returns normally has its result recorded as the key's outcome (the fenced
 * write succeeds): every repeat replays it and the message never goes out. A sender that throws
 * instead has the key released and the retry sends once.
 *
 * <p>In-memory store behind a store that fails one renewal, lease 4 s, clock moved by hand: the
 * sender's task waited 3.5 s, so the check renews first.
 */
class LeaseHeldAfterFailedRenewalProbeTest {

  static final Duration TTL = Duration.ofHours(1);

  final MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final AtomicBoolean failNextRenewal = new AtomicBoolean();
  final KeyStore store =
      new ForwardingKeyStore(InMemoryKeyStore.builder().build()) {
        @Override
        public boolean extend(ExtendRequest request) {
          failIfAsked();
          return delegate.extend(request);
        }

        @Override
        public List<Boolean> extendAll(List<ExtendRequest> requests) {
          failIfAsked();
          return delegate.extendAll(requests);
        }

        private void failIfAsked() {
          if (failNextRenewal.getAndSet(false)) {
            throw new KeyStoreException("the store did not answer in time", null);
          }
        }
      };
  final IdempotencyGuard guard =
      IdempotencyGuard.builder()
          .store(store)
          .clock(clock)
          .lease(Duration.ofSeconds(4))
          .inFlightWait(Duration.ZERO)
          .build();

  @AfterEach
  void close() {
    guard.close();
  }

  /**
   * Open finding (probeJ, medium: a lost send for a sender that follows the Javadoc's "sends
   * nothing" and returns normally; a store that fails one renewal is enough): "[the message went
   * out once (first: not sent, repeat: not sent)] Expecting AtomicInteger(0) to have value: 1". The
   * Javadoc of {@link SendContext#leaseHeld()} now tells the sender to throw (the next test); what
   * the guard should do with a result returned after {@code false} is open (record it, as now; or
   * release, trusting that nothing was sent).
   */
  @Tag("open-finding")
  @Test
  void aSenderToldTheLeaseIsNotHeldThatReturnsDoesNotLoseTheSend() {
    String key = "lease-held-failed-renewal:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();

    String first =
        guard.execute(
            key,
            TTL,
            ctx -> {
              clock.advance(Duration.ofMillis(3500)); // the provider call waited on a task
              failNextRenewal.set(true);
              return ctx.leaseHeld() ? "sent-" + sends.incrementAndGet() : "not sent";
            });
    String again = guard.execute(key, TTL, ctx -> "sent-" + sends.incrementAndGet());

    assertThat(sends)
        .as("the message went out once (first: %s, repeat: %s)", first, again)
        .hasValue(1);
  }

  /** The same, the sender throwing when told the lease is not held: the retry sends once. */
  @Test
  void aSenderToldTheLeaseIsNotHeldThatThrowsIsSentByTheRetry() {
    String key = "lease-held-failed-renewal-throws:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();

    Throwable first =
        catchThrowable(
            () ->
                guard.execute(
                    key,
                    TTL,
                    ctx -> {
                      clock.advance(Duration.ofMillis(3500));
                      failNextRenewal.set(true);
                      if (!ctx.leaseHeld()) {
                        throw new IllegalStateException("lease not held: nothing sent");
                      }
                      return "sent-" + sends.incrementAndGet();
                    }));
    String again = guard.execute(key, TTL, ctx -> "sent-" + sends.incrementAndGet());

    assertThat(first).isInstanceOf(IllegalStateException.class);
    assertThat(again).isEqualTo("sent-1");
    assertThat(sends).hasValue(1);
  }
}
