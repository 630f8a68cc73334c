package dev.idempotency.spi;

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

/** Several threads claiming the same keys in different orders; used by both racing processes. */
final class KeyStoreRace {

  record Result(Set<String> won, int claims) {}

  private KeyStoreRace() {}

  static Result run(KeyStore store, List<String> keyIds, int threads, CountDownLatch go)
      throws Exception {
    Set<String> won = ConcurrentHashMap.newKeySet();
    AtomicInteger claims = new AtomicInteger();
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    try {
      List<Future<?>> futures = new ArrayList<>();
      for (int t = 0; t < threads; t++) {
        List<String> order = new ArrayList<>(keyIds);
        if (t % 3 == 1) {
          Collections.reverse(order);
        } else if (t % 3 == 2) {
          Collections.shuffle(order, new Random(t));
        }
        futures.add(
            pool.submit(
                () -> {
                  go.await();
                  for (String keyId : order) {
                    ClaimResult result =
                        store.claim(
                            new ClaimRequest(
                                keyId,
                                UUID.randomUUID().toString(),
                                "",
                                Instant.now(),
                                Duration.ofMinutes(10),
                                Duration.ofHours(1),
                                true,
                                null));
                    claims.incrementAndGet();
                    if (result instanceof ClaimResult.Claimed && !won.add(keyId)) {
                      throw new AssertionError("one process claimed a key twice");
                    }
                  }
                  return null;
                }));
      }
      for (Future<?> future : futures) {
        future.get(5, TimeUnit.MINUTES);
      }
      return new Result(won, claims.get());
    } finally {
      pool.shutdownNow();
    }
  }
}
