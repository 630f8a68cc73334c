package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.Iterator;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * probeF (SPEC 1, a thread hung at close): a batch's hand-out waits in {@code renewNow} for the
 * keeper's renewal of its key, which the store holds; meanwhile the guard closes (grace 300 ms).
 * The close must return within about its grace (no deadlock with the waiting hand-out), and once
 * the store answers the keeper, the hand-out returns and hands nothing out: the guard gave up, no
 * send may start on a lease nobody renews. Lease 4 s, the guard's clock moved by hand ({@link
 * KeeperHeldAcrossClose}).
 */
class RenewNowDuringCloseProbeTest extends KeeperHeldAcrossClose {

  @Test
  void aHandOutWaitingForTheKeeperDoesNotHoldTheCloseAndSendsNothingAfterIt() throws Exception {
    Batch<String> batch = claimTwo("renew-close");
    Iterator<Batch.Item> items = batch.toSend().iterator();
    batch.succeeded(items.next(), "sent-0");
    awaitTheKeeperHeld();

    clock.advance(Duration.ofMillis(3_500)); // the hand-out renews the second key first: waits
    Future<String> next =
        handOutOnceItWaits(
            "the hand-out waits for the keeper",
            () -> items.hasNext() ? "handed out " + items.next().key() : "nothing handed out");

    long closeMillis = closeTheGuard();

    letKeeperGo.countDown();
    String answer = next.get(30, TimeUnit.SECONDS);
    assertThat(answer)
        .as("hand-out after the close (close took %d ms)", closeMillis)
        .isEqualTo("nothing handed out");
  }
}
