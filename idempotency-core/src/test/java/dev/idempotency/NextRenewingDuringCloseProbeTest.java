package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.Iterator;
import java.util.NoSuchElementException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * probeT (SPEC 1): {@code RenewNowDuringCloseProbeTest} for {@code next()} rather than {@code
 * hasNext()}: a loop reserved key 1 in {@code hasNext()}; when it calls {@code next()}, the check
 * there ({@code BatchHandOut.stillLive}) must renew key 1 and waits in {@code renewNow} for the
 * keeper's renewal of it, which the store holds; meanwhile the guard closes (grace 300 ms) and
 * gives up. Once the store answers the keeper, {@code next()} must hand nothing out: the guard gave
 * up, no send may start on a lease nobody renews (the check of {@code
 * BatchReservedKeyAfterCloseProbeTest} made before the wait missed this). Lease 4 s, the guard's
 * clock moved by hand ({@link KeeperHeldAcrossClose}).
 */
class NextRenewingDuringCloseProbeTest extends KeeperHeldAcrossClose {

  // probeT: failed on c8a7ab8 (low: a send on a lease nobody renews, which
  // BatchReservedKeyAfterCloseProbeTest shows leads to a second send), in-memory store: "[next()
  // after the close gave up] expected: "nothing handed out" but was: "handed out
  // next-renew-close:...:0"": the gaveUp() check of next() ran before the renewal wait of
  // stillLive. FIXED: Batch.Item.markHandedOut refuses once the guard gave up.
  @Test
  void aNextWaitingForTheKeeperAcrossTheCloseHandsNothingOut() throws Exception {
    Batch<String> batch = claimTwo("next-renew-close");
    Iterator<Batch.Item> items = batch.toSend().iterator();
    assertThat(items.hasNext()).as("key 0 is reserved").isTrue();
    awaitTheKeeperHeld();

    clock.advance(Duration.ofMillis(3_500)); // next() renews key 0 first: waits for the keeper
    Future<String> next =
        handOutOnceItWaits(
            "next() waits for the keeper",
            () -> {
              try {
                return "handed out " + items.next().key();
              } catch (NoSuchElementException e) {
                return "nothing handed out";
              }
            });

    closeTheGuard();

    letKeeperGo.countDown();
    String answer = next.get(30, TimeUnit.SECONDS);
    assertThat(answer).as("next() after the close gave up").isEqualTo("nothing handed out");
    batch.record();
  }
}
