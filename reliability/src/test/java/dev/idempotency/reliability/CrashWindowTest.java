package dev.idempotency.reliability;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.Outcome;
import dev.idempotency.ResultCodec;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.ForwardingKeyStore;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Test;

/**
 * Measures the crash window: from the moment the provider accepted a message (the sender returned)
 * to the moment its outcome is recorded (the fenced complete returned). A crash inside it is the
 * only way to a duplicate. Figures are printed, single-threaded on loopback, for
 * docs/guarantees.md; the test asserts that every send was recorded, not how fast.
 */
class CrashWindowTest {

  static final int SENDS = 2_000;

  /** Times each complete call of a real store. */
  static final class TimedStore extends ForwardingKeyStore {
    final List<Long> completeNanos = Collections.synchronizedList(new ArrayList<>());

    TimedStore(KeyStore delegate) {
      super(delegate);
    }

    @Override
    public boolean complete(CompleteRequest request) {
      long start = System.nanoTime();
      try {
        return delegate.complete(request);
      } finally {
        completeNanos.add(System.nanoTime() - start);
      }
    }
  }

  void measure(String name, KeyStore store) {
    TimedStore timed = new TimedStore(store);
    IdempotencyGuard guard = IdempotencyGuard.builder().store(timed).build();
    int recorded = 0;
    for (int i = 0; i < SENDS; i++) {
      Outcome<String> outcome =
          guard.executeForOutcome(
              IdempotencyRequest.of("window:" + UUID.randomUUID(), Duration.ofHours(1)),
              ResultCodec.string(),
              ctx -> "n_801");
      recorded += outcome.recorded() ? 1 : 0;
    }
    List<Long> sorted =
        new ArrayList<>(timed.completeNanos.subList(SENDS / 4, SENDS)); // after warm-up
    Collections.sort(sorted);
    System.out.printf(
        "crash window %s: p50 %.3f ms, p99 %.3f ms, max %.3f ms (%d sends after %d warm-up)%n",
        name,
        sorted.get(sorted.size() / 2) / 1e6,
        sorted.get((int) (sorted.size() * 0.99)) / 1e6,
        sorted.get(sorted.size() - 1) / 1e6,
        sorted.size(),
        SENDS / 4);
    assertThat(recorded).isEqualTo(SENDS);
  }

  @Test
  void postgresql() throws Exception {
    try (RestartablePostgres postgres = new RestartablePostgres()) {
      measure("postgresql", Stores.open(postgres.url(), 2));
    }
  }

  @Test
  void dynamodb() throws Exception {
    try (RestartableDynalite dynalite = new RestartableDynalite()) {
      measure("dynamodb (dynalite 4.0.0, on disk)", Stores.open(dynalite.spec(), 1));
    }
  }

  @Test
  void redis() throws Exception {
    try (RestartableRedis redis = new RestartableRedis(true)) {
      measure("redis (AOF, appendfsync always)", Stores.open(redis.uri(), 1));
    }
  }
}
