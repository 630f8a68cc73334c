package dev.idempotency.micrometer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.KeyStoreException;
import dev.idempotency.ResultCodec;
import dev.idempotency.SendContext;
import dev.idempotency.TakeoverPolicy;
import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.KeyStore;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.Tag;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.micrometer.observation.Observation;
import io.micrometer.observation.ObservationHandler;
import io.micrometer.observation.tck.TestObservationRegistry;
import io.micrometer.observation.tck.TestObservationRegistryAssert;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** Every outcome of the guard, as meters and observations, on a real in-memory store. */
class MicrometerIdempotencyObserverTest {

  static final Duration TTL = Duration.ofHours(1);

  final SimpleMeterRegistry meters = new SimpleMeterRegistry();
  final TestObservationRegistry observations = TestObservationRegistry.create();
  final MicrometerIdempotencyObserver observer =
      MicrometerIdempotencyObserver.builder(meters).observationRegistry(observations).build();
  final ExecutorService pool = Executors.newCachedThreadPool();

  /** Every observation context once stopped. */
  final List<Observation.Context> stopped = new java.util.concurrent.CopyOnWriteArrayList<>();

  {
    observations
        .observationConfig()
        .observationHandler(
            new ObservationHandler<>() {
              @Override
              public boolean supportsContext(Observation.Context context) {
                return true;
              }

              @Override
              public void onStop(Observation.Context context) {
                stopped.add(context);
              }
            });
  }

  /** A clock tests move, for leases. */
  final AtomicReference<Instant> now = new AtomicReference<>(Instant.parse("2030-01-01T00:00:00Z"));

  final Clock clock =
      new Clock() {
        @Override
        public Instant instant() {
          return now.get();
        }

        @Override
        public java.time.ZoneId getZone() {
          return ZoneOffset.UTC;
        }

        @Override
        public Clock withZone(java.time.ZoneId zone) {
          return this;
        }
      };

  /** The in-memory store, made to fail on demand like a stopped server. */
  final AtomicBoolean storeDown = new AtomicBoolean();

  final KeyStore store =
      new KeyStore() {
        private final KeyStore delegate = InMemoryKeyStore.builder().maxPayloadBytes(64).build();

        private void check() {
          if (storeDown.get()) {
            throw new KeyStoreException("down (test)", null);
          }
        }

        @Override
        public ClaimResult claim(ClaimRequest request) {
          check();
          return delegate.claim(request);
        }

        @Override
        public boolean complete(CompleteRequest request) {
          check();
          return delegate.complete(request);
        }

        @Override
        public boolean release(String keyId, String ownerToken) {
          check();
          return delegate.release(keyId, ownerToken);
        }

        @Override
        public boolean extend(ExtendRequest request) {
          check();
          return delegate.extend(request);
        }

        @Override
        public int maxPayloadBytes() {
          return delegate.maxPayloadBytes();
        }

        @Override
        public String kind() {
          return "memory";
        }
      };

  IdempotencyGuard.Builder guard() {
    return IdempotencyGuard.builder()
        .store(store)
        .clock(clock)
        .inFlightWait(Duration.ZERO)
        .observer(observer);
  }

  @AfterEach
  void stop() {
    pool.shutdownNow();
  }

  static String key() {
    return "otp:+15550100042:" + UUID.randomUUID();
  }

  double calls(String operation, String outcome) {
    return meters
        .find(MicrometerIdempotencyObserver.CALLS)
        .tags("operation", operation, "outcome", outcome)
        .counters()
        .stream()
        .mapToDouble(c -> c.count())
        .sum();
  }

  @Test
  void aFirstSendIsSentAReplayReplayedEachWithAnObservation() {
    IdempotencyGuard guard = guard().build();
    String key = key();

    guard.execute(key, TTL, ctx -> "n_1");
    guard.execute(key, TTL, ctx -> "n_2");

    assertThat(calls("otp", "sent")).isEqualTo(1);
    assertThat(calls("otp", "replayed")).isEqualTo(1);
    assertThat(
            meters
                .find(MicrometerIdempotencyObserver.SEND)
                .tags("operation", "otp", "result", "success")
                .timer()
                .count())
        .isEqualTo(1);
    assertThat(
            meters
                .find(MicrometerIdempotencyObserver.STORE)
                .tags("store", "memory", "operation", "claim")
                .timer()
                .count())
        .isEqualTo(2);
    assertThat(
            meters
                .find(MicrometerIdempotencyObserver.STORE)
                .tags("store", "memory", "operation", "complete")
                .timer()
                .count())
        .isEqualTo(1);
    TestObservationRegistryAssert.assertThat(observations)
        .hasNumberOfObservationsWithNameEqualTo(MicrometerIdempotencyObserver.OBSERVATION, 2)
        .hasAnObservationWithAKeyValue("outcome", "sent")
        .hasAnObservationWithAKeyValue("outcome", "replayed")
        .hasAnObservationWithAKeyValue("store", "memory")
        .hasAnObservationWithAKeyValue("operation", "otp");
  }

  @Test
  void theSenderRunsInsideTheCallsObservation() {
    IdempotencyGuard guard = guard().build();
    AtomicReference<String> current = new AtomicReference<>();

    guard.execute(
        key(),
        TTL,
        ctx -> {
          current.set(observations.getCurrentObservation().getContext().getName());
          return "n_1";
        });

    assertThat(current).hasValue(MicrometerIdempotencyObserver.OBSERVATION);
  }

  @Test
  void aFailureIsReleasedAndTheObservationCarriesTheError() {
    IdempotencyGuard guard = guard().build();

    assertThatThrownBy(
            () ->
                guard.execute(
                    key(),
                    TTL,
                    ctx -> {
                      throw new IllegalStateException("provider down");
                    }))
        .isInstanceOf(IllegalStateException.class);

    assertThat(calls("otp", "released")).isEqualTo(1);
    assertThat(
            meters
                .find(MicrometerIdempotencyObserver.SEND)
                .tags("result", "failure")
                .timer()
                .count())
        .isEqualTo(1);
    TestObservationRegistryAssert.assertThat(observations)
        .hasSingleObservationThat()
        .hasLowCardinalityKeyValue("outcome", "released")
        .assertThatError()
        .isInstanceOf(IllegalStateException.class);
  }

  @Test
  void permanentFailuresAreStoredThenReplayed() {
    IdempotencyGuard guard =
        guard().failureClassifier(f -> f instanceof IllegalArgumentException).build();
    String key = key();

    catchThrowable(
        () ->
            guard.execute(
                key,
                TTL,
                ctx -> {
                  throw new IllegalArgumentException("invalid number");
                }));
    catchThrowable(() -> guard.execute(key, TTL, ctx -> "n"));

    assertThat(calls("otp", "failure_stored")).isEqualTo(1);
    assertThat(calls("otp", "failure_replayed")).isEqualTo(1);
  }

  @Test
  void aRepeatWhileTheFirstSendsIsInProgressAndTheGaugeCountsCallsInFlight() throws Exception {
    IdempotencyGuard guard = guard().build();
    String key = key();
    CountDownLatch sending = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    Future<String> first =
        pool.submit(
            () ->
                guard.execute(
                    key,
                    TTL,
                    ctx -> {
                      sending.countDown();
                      release.await(30, TimeUnit.SECONDS);
                      return "n_1";
                    }));
    assertThat(sending.await(30, TimeUnit.SECONDS)).isTrue();
    double inFlight = meters.get(MicrometerIdempotencyObserver.ACTIVE).gauge().value();

    assertThatThrownBy(() -> guard.execute(key, TTL, ctx -> "n_2"))
        .isInstanceOf(IdempotencyInProgressException.class);
    release.countDown();
    first.get(30, TimeUnit.SECONDS);

    assertThat(inFlight).isEqualTo(1);
    assertThat(meters.get(MicrometerIdempotencyObserver.ACTIVE).gauge().value()).isZero();
    assertThat(calls("otp", "in_progress")).isEqualTo(1);
  }

  @Test
  void keyReuseStoreErrorsAndFailOpenSends() {
    IdempotencyGuard guard = guard().build();
    IdempotencyGuard open = guard().failOpen(true).build();
    String key = key();
    guard.executeForOutcome(
        IdempotencyRequest.of(key, TTL).withFingerprint("a"), ResultCodec.string(), ctx -> "n");

    catchThrowable(
        () ->
            guard.executeForOutcome(
                IdempotencyRequest.of(key, TTL).withFingerprint("b"),
                ResultCodec.string(),
                ctx -> "n"));
    storeDown.set(true);
    catchThrowable(() -> guard.execute(key(), TTL, ctx -> "n"));
    open.execute(key(), TTL, ctx -> "n");
    storeDown.set(false);

    assertThat(calls("otp", "key_reused")).isEqualTo(1);
    assertThat(calls("otp", "store_error")).isEqualTo(2);
    assertThat(calls("otp", "fail_open_send")).isEqualTo(1);
  }

  @Test
  void takeoversOutcomesNotRecordedLeaseOverrunsAndUnknownOutcomes() throws Exception {
    IdempotencyGuard guard = guard().leaseRenewal(false).build();
    IdempotencyGuard strict = guard().takeoverPolicy(TakeoverPolicy.REFUSE).build();
    String key = key();
    CountDownLatch sending = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    Future<String> slow =
        pool.submit(
            () ->
                guard.execute(
                    key,
                    TTL,
                    ctx -> {
                      sending.countDown();
                      release.await(30, TimeUnit.SECONDS);
                      return "late";
                    }));
    assertThat(sending.await(30, TimeUnit.SECONDS)).isTrue();
    now.updateAndGet(t -> t.plus(IdempotencyGuard.DEFAULT_LEASE.plusSeconds(1)));

    catchThrowable(() -> strict.execute(key, TTL, ctx -> "strict"));
    guard.execute(key, TTL, ctx -> "winner");
    release.countDown();
    slow.get(30, TimeUnit.SECONDS);

    assertThat(calls("otp", "outcome_unknown")).isEqualTo(1);
    assertThat(calls("otp", "takeover")).isEqualTo(1);
    assertThat(calls("otp", "lease_overrun")).isEqualTo(1);
    assertThat(calls("otp", "outcome_not_recorded")).isEqualTo(1);
  }

  @Test
  void aResultTooLargeToStoreIsCounted() {
    IdempotencyGuard guard = guard().build();

    guard.execute(key(), TTL, ctx -> "x".repeat(500));

    assertThat(calls("otp", "result_not_stored")).isEqualTo(1);
    assertThat(calls("otp", "sent")).isEqualTo(1);
  }

  @Test
  void batchesAreCountedPerKey() {
    IdempotencyGuard guard = guard().build();
    List<IdempotencyRequest> requests = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      requests.add(IdempotencyRequest.of(IdempotencyKey.of("campaign", "c1", "u" + i), TTL));
    }

    var batch = guard.claimBatch(requests, ResultCodec.string());
    batch.toSend().forEach(item -> batch.succeeded(item, "n"));
    batch.record();

    assertThat(calls("campaign", "sent")).isEqualTo(3);
    assertThat(
            meters
                .find(MicrometerIdempotencyObserver.STORE)
                .tags("operation", "claim_all")
                .timer()
                .count())
        .isEqualTo(1);
  }

  @Test
  void noTagOrKeyValueEverHoldsAKeyADigestAResultOrAProviderKey() {
    IdempotencyGuard guard = guard().build();
    String key = key();
    AtomicReference<SendContext> context = new AtomicReference<>();
    guard.execute(
        key,
        TTL,
        ctx -> {
          context.set(ctx);
          return "n_secret_result";
        });
    guard.execute(key, TTL, ctx -> "n_2");
    catchThrowable(
        () ->
            guard.execute(
                key(),
                TTL,
                ctx -> {
                  throw new IllegalStateException("x");
                }));

    List<String> values = new ArrayList<>();
    for (Meter meter : meters.getMeters()) {
      for (Tag tag : meter.getId().getTags()) {
        values.add(tag.getValue());
      }
    }
    for (Observation.Context stoppedContext : stopped) {
      stoppedContext.getAllKeyValues().forEach(keyValue -> values.add(keyValue.getValue()));
      values.add(stoppedContext.getContextualName());
    }
    assertThat(stopped).hasSize(3);

    assertThat(values).isNotEmpty();
    String digest = dev.idempotency.IdempotencyKey.digest(key);
    assertThat(values)
        .allSatisfy(
            value ->
                assertThat(value)
                    .doesNotContain("+15550100042")
                    .doesNotContain(digest)
                    .doesNotContain("n_secret_result")
                    .doesNotContain(context.get().providerKey()));
  }
}
