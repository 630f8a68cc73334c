package dev.idempotency.benchmarks;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.Sender;
import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.micrometer.MicrometerIdempotencyObserver;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.micrometer.observation.Observation;
import io.micrometer.observation.ObservationHandler;
import io.micrometer.observation.ObservationRegistry;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicLong;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;

/**
 * What metrics and observations cost on the in-memory store, the path where the guard's own time
 * shows most: the same first sends and replays with no observer, with the Micrometer observer
 * (meters only), and with meters plus an observation handler (what a tracing bridge adds, without
 * the bridge's own work).
 */
@State(Scope.Benchmark)
public class ObserverOverheadBenchmark {

  static final Duration TTL = Duration.ofHours(24);
  static final Sender<String> NO_OP = ctx -> "n_0123456789abcd";
  static final int REPLAY_KEYS = 2_000;

  @Param({"none", "metrics", "metrics+observation"})
  public String observer;

  IdempotencyGuard guard;
  final String[] replayKeys = new String[REPLAY_KEYS];
  final String prefix = "new:" + UUID.randomUUID() + ":";
  final AtomicLong next = new AtomicLong();
  int replay;

  @Setup(Level.Trial)
  public void start() {
    IdempotencyGuard.Builder builder =
        IdempotencyGuard.builder().store(InMemoryKeyStore.builder().maximumSize(5_000_000).build());
    if (!observer.equals("none")) {
      ObservationRegistry observations = ObservationRegistry.NOOP;
      if (observer.equals("metrics+observation")) {
        observations = ObservationRegistry.create();
        observations
            .observationConfig()
            .observationHandler(
                new ObservationHandler<>() {
                  @Override
                  public boolean supportsContext(Observation.Context context) {
                    return true;
                  }
                });
      }
      builder.observer(
          MicrometerIdempotencyObserver.builder(new SimpleMeterRegistry())
              .observationRegistry(observations)
              .build());
    }
    guard = builder.build();
    for (int i = 0; i < REPLAY_KEYS; i++) {
      replayKeys[i] = "otp:replay:" + i;
      guard.execute(replayKeys[i], TTL, NO_OP);
    }
  }

  @Benchmark
  public String firstSend() {
    return guard.execute(prefix + next.incrementAndGet(), TTL, NO_OP);
  }

  @Benchmark
  public String replay() {
    replay = (replay + 1) % REPLAY_KEYS;
    return guard.execute(replayKeys[replay], TTL, NO_OP);
  }
}
