package dev.idempotency.tck;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.Batch;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.ResultCodec;
import dev.idempotency.spi.KeyStore;
import java.time.Duration;
import java.util.ArrayList;
import java.util.ConcurrentModificationException;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * probeJ on fixlease (c49da6b7), SPEC 1: {@code Batch.record()} leaves a key handed out on another
 * thread and not reported claimed, and accepts its report after {@code record()}. With 16 send
 * loops (each its own iterator, on pool threads) and {@code record()} in the middle (on the test's
 * thread), is every key sent exactly once, no second send and no lost send, once every key has been
 * repeated on another guard? Real guards, real clock.
 *
 * <p>Extend it with a store: implement {@link #newStore()}, and {@link #closeStore(KeyStore)} if
 * the store holds resources; {@link #rounds()} to run fewer rounds on a slow store.
 */
public abstract class BatchRecordRacingLoopsContract {

  /** The idempotency window of the keys. */
  protected static final Duration TTL = Duration.ofHours(1);

  private final ExecutorService pool = Executors.newFixedThreadPool(16);
  private KeyStore store;
  private IdempotencyGuard first;
  private IdempotencyGuard second;

  /** A fresh store under test. */
  protected abstract KeyStore newStore();

  /** Releases what {@link #newStore()} opened; nothing by default. */
  protected void closeStore(KeyStore store) {}

  /**
   * Rounds of 64 keys to run.
   *
   * @return 10 by default
   */
  protected int rounds() {
    return 10;
  }

  @BeforeEach
  void startGuards() {
    store = newStore();
    first = guard();
    second = guard();
  }

  private IdempotencyGuard guard() {
    return IdempotencyGuard.builder()
        .store(store)
        .lease(Duration.ofSeconds(30))
        // seen once in memory (probeJ): after every key was reported, close() waited its whole
        // grace period (30 s by default) for "1 calls still running"; cause not found yet
        .closeGracePeriod(Duration.ofSeconds(2))
        .inFlightWait(Duration.ZERO)
        .build();
  }

  @AfterEach
  void stopGuards() {
    pool.shutdownNow();
    if (first != null) {
      first.close();
      second.close();
    }
    if (store != null) {
      closeStore(store);
    }
  }

  /**
   * 16 send loops (each its own iterator) racing record() on the test's thread, {@link #rounds()}
   * rounds of 64 keys: a loop's item is sent (counted) and then reported succeeded, or fails before
   * the provider call (not counted) and is reported failed. Then every key is repeated on another
   * guard: each must end up sent exactly once.
   */
  @Test
  void sixteenLoopsRacingRecordSendEveryKeyExactlyOnce() throws Exception {
    int loops = 16;
    for (int round = 0; round < rounds(); round++) {
      List<IdempotencyRequest> requests = new ArrayList<>();
      for (int i = 0; i < 64; i++) {
        requests.add(IdempotencyRequest.of("probe-16-loops:" + UUID.randomUUID(), TTL));
      }
      Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();
      requests.forEach(r -> sends.put(r.key(), new AtomicInteger()));
      Batch<String> batch = first.claimBatch(requests, ResultCodec.string());
      CountDownLatch start = new CountDownLatch(1);
      AtomicInteger refused = new AtomicInteger();
      List<Future<?>> running = new ArrayList<>();
      for (int l = 0; l < loops; l++) {
        running.add(
            pool.submit(
                () -> {
                  start.await();
                  Iterator<Batch.Item> it = batch.toSend().iterator();
                  while (true) {
                    Batch.Item item;
                    try {
                      if (!it.hasNext()) {
                        break;
                      }
                      item = it.next();
                    } catch (NoSuchElementException | ConcurrentModificationException ended) {
                      break;
                    }
                    boolean send = ThreadLocalRandom.current().nextInt(4) != 0;
                    if (send) {
                      sends.get(item.key()).incrementAndGet();
                    }
                    if (ThreadLocalRandom.current().nextBoolean()) {
                      Thread.sleep(ThreadLocalRandom.current().nextInt(3));
                    }
                    try {
                      if (send) {
                        batch.succeeded(item, "sent");
                      } else {
                        batch.failed(item, new RuntimeException("refused before sending"));
                      }
                    } catch (IllegalStateException afterRecord) {
                      refused.incrementAndGet();
                    }
                  }
                  return null;
                }));
      }
      start.countDown();
      Thread.sleep(ThreadLocalRandom.current().nextInt(1, 4)); // record() in the middle
      batch.record();
      for (Future<?> loop : running) {
        loop.get(60, TimeUnit.SECONDS);
      }
      for (IdempotencyRequest request : requests) {
        String key = request.key();
        second.execute(key, TTL, ctx -> "repeat-" + sends.get(key).incrementAndGet());
      }
      for (IdempotencyRequest request : requests) {
        assertThat(sends.get(request.key()).get())
            .as("sends of %s in round %s (reports refused: %s)", request.key(), round, refused)
            .isEqualTo(1);
      }
      assertThat(refused).as("reports refused after record()").hasValue(0);
    }
  }
}
