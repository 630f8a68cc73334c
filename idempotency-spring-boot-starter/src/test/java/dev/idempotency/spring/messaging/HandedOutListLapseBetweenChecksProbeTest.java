package dev.idempotency.spring.messaging;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.Batch;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.ResultCodec;
import dev.idempotency.inmemory.InMemoryKeyStore;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Probe (probeW, of the batch listener's list): {@link HandedOutList#get} asks the batch's iterator
 * {@code hasNext()}, then {@code next()}. {@code next()} checks the reserved key's lease again
 * (after renewing what is due): a key whose lease no longer outlasts a send there is lapsed, and
 * with no key after it {@code next()} throws {@code NoSuchElementException} (documented in core,
 * {@code BatchLeaseLapsedBeforeNextTest}). The list promises that a message whose lease lapsed
 * before it was read throws the list's deferral ({@link HandedOutList#deferral}), which the starter
 * takes for "comes back later" (never counted, recovered or dead-lettered by the container's
 * handler).
 *
 * <p>The lapse between the two checks is made deterministic with the guard's clock: it steps past
 * the lease at the moment {@code next()} checks the lease again (as a renewal that hangs for a
 * lease on a store that does not answer, or a long pause, would). In-memory store (the guard's
 * clock), lease renewal off.
 */
class HandedOutListLapseBetweenChecksProbeTest {

  static final Duration LEASE = Duration.ofSeconds(30);

  /** The guard's clock; steps past the lease once, when {@code next()} checks a lease again. */
  static final class SteppingClock extends Clock {
    private volatile Instant now = Instant.parse("2030-01-01T00:00:00Z");
    final AtomicBoolean armed = new AtomicBoolean();

    @Override
    public Instant instant() {
      if (armed.get() && inNextsSecondCheck() && armed.compareAndSet(true, false)) {
        now = now.plus(LEASE).plusSeconds(1);
      }
      return now;
    }

    private static boolean inNextsSecondCheck() {
      return StackWalker.getInstance()
          .walk(
              frames ->
                  frames.anyMatch(
                      frame ->
                          frame.getClassName().equals("dev.idempotency.BatchHandOut")
                              && frame.getMethodName().equals("stillLive")));
    }

    @Override
    public ZoneId getZone() {
      return ZoneOffset.UTC;
    }

    @Override
    public Clock withZone(ZoneId zone) {
      return this;
    }
  }

  final SteppingClock clock = new SteppingClock();
  final IdempotencyGuard guard =
      IdempotencyGuard.builder()
          .store(InMemoryKeyStore.builder().build())
          .clock(clock)
          .lease(LEASE)
          .leaseRenewal(false)
          .inFlightWait(Duration.ZERO)
          .build();

  @AfterEach
  void close() {
    guard.close();
  }

  /*
   * Was an open finding (probeW, on 164f714, Boot 3.5 and 4.0; low to medium: the listener got a
   * NoSuchElementException where the list promises its deferral; a listener that names the failed
   * message (BatchDeliveryFailedException(i, e), as the docs show) turned it into a failed send,
   * which the container's handler counts toward dead-lettering a message that was never sent),
   * fixed by fixbatch (HandedOutList.nextHandedOut takes next()'s NoSuchElementException for "none
   * of the rest was handed out": they lapsed). Failed: "[reading message 0 whose lease lapsed
   * between hasNext() and next()] expected the list's deferral but got
   * java.util.NoSuchElementException: no key left to hand out: those hasNext() found were handed
   * out, reported or lapsed since".
   */
  @Test
  void aKeyLapsingBetweenHasNextAndNextIsTheListsDeferral() {
    String run = UUID.randomUUID().toString();
    List<String> keys = List.of("lapse-between-" + run);
    List<IdempotencyRequest> requests = new ArrayList<>();
    for (String key : keys) {
      requests.add(IdempotencyRequest.of(key, Duration.ofHours(1)).withOperation("probe-w"));
    }
    Batch<String> batch = guard.claimBatch(requests, ResultCodec.string());
    List<Object> messages = new ArrayList<>(List.of("message-0-" + run));
    RuntimeException deferral = new IllegalStateException("the list's deferral of message 0");
    HandedOutList list =
        new HandedOutList(
            "probe-w",
            messages,
            keys,
            batch,
            new BatchContexts("probe-w", messages),
            i -> i == 0 ? deferral : new IllegalStateException("deferral of " + i),
            null);
    clock.armed.set(true);
    Throwable read;
    try {
      list.get(0);
      read = null;
    } catch (RuntimeException e) {
      read = e;
    }
    batch.record();
    assertThat(clock.armed).as("the clock stepped in next()'s second check").isFalse();
    assertThat(read)
        .as(
            "reading message 0 whose lease lapsed between hasNext() and next(): expected the"
                + " list's deferral but got %s",
            read)
        .isSameAs(deferral);
  }
}
