package dev.idempotency.tck;

import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.KeyStore;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * One process's side of the cross-process race: threads parked on a latch, then claiming every key.
 * Half the threads go through the keys in the process's own direction (the parent backwards, the
 * child forwards), so the two processes meet in the middle whatever their start-up offset; the
 * other half go in a random order.
 */
final class KeyStoreRace {

  record Result(Set<String> won, int claims) {}

  private final KeyStore store;
  private final CountDownLatch go = new CountDownLatch(1);
  private final Set<String> won = ConcurrentHashMap.newKeySet();
  private final AtomicInteger claims = new AtomicInteger();
  private final ExecutorService pool;
  private final List<Future<?>> futures = new ArrayList<>();

  KeyStoreRace(KeyStore store, List<String> keyIds, int threads, boolean reverse) {
    this.store = store;
    this.pool = Executors.newFixedThreadPool(threads);
    for (int t = 0; t < threads; t++) {
      List<String> order = new ArrayList<>(keyIds);
      if (t % 2 == 0) {
        if (reverse) {
          Collections.reverse(order);
        }
      } else {
        Collections.shuffle(order, new Random(t * 31L + (reverse ? 1 : 0)));
      }
      futures.add(pool.submit(() -> claimAll(order)));
    }
  }

  /** Warms the store's code paths and connections up on throwaway keys. */
  void warmUp() {
    for (int i = 0; i < 50; i++) {
      store.claim(request("warmup" + UUID.randomUUID().toString().replace("-", "")));
    }
  }

  Result run() throws Exception {
    go.countDown();
    try {
      for (Future<?> future : futures) {
        future.get(5, TimeUnit.MINUTES);
      }
      return new Result(won, claims.get());
    } finally {
      pool.shutdownNow();
    }
  }

  private Void claimAll(List<String> order) throws InterruptedException {
    go.await();
    for (String keyId : order) {
      ClaimResult result = store.claim(request(keyId));
      claims.incrementAndGet();
      if (result instanceof ClaimResult.Claimed && !won.add(keyId)) {
        throw new AssertionError("one process claimed a key twice");
      }
    }
    return null;
  }

  private static ClaimRequest request(String keyId) {
    return new ClaimRequest(
        keyId,
        UUID.randomUUID().toString(),
        "",
        Instant.now(),
        Duration.ofMinutes(10),
        Duration.ofHours(1),
        true,
        null);
  }
}
