package dev.idempotency.micrometer;

import dev.idempotency.IdempotencyEvent;
import dev.idempotency.IdempotencyObserver;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import io.micrometer.observation.Observation;
import io.micrometer.observation.ObservationRegistry;
import java.time.Duration;
import java.util.EnumSet;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Micrometer meters and an {@link Observation} for every guarded call:
 *
 * <pre>{@code
 * IdempotencyGuard guard = IdempotencyGuard.builder()
 *     .store(store)
 *     .observer(MicrometerIdempotencyObserver.builder(meterRegistry)
 *         .observationRegistry(observationRegistry)   // for traces; optional
 *         .build())
 *     .build();
 * }</pre>
 *
 * <table>
 *   <caption>Meters</caption>
 *   <tr><th>name</th><th>type</th><th>tags</th><th>what</th></tr>
 *   <tr><td>{@value #CALLS}</td><td>counter</td><td>{@code operation}, {@code outcome}</td>
 *       <td>{@code sent} for a first send, {@code replayed} for a repeat answered from the store,
 *       and every other outcome in lower case ({@code in_progress}, {@code key_reused}, {@code
 *       released}, {@code failure_stored}, {@code store_error}, {@code outcome_not_recorded}
 *       (then {@code outcome_recorded_late} or {@code outcome_abandoned} once the guard's background
 *       write of that outcome ended),
 *       {@code takeover}, {@code fail_open_send}, ...)</td></tr>
 *   <tr><td>{@value #SEND}</td><td>timer</td><td>{@code operation}, {@code result} ({@code
 *       success}, {@code failure})</td><td>the sender's time</td></tr>
 *   <tr><td>{@value #STORE}</td><td>timer, with a percentile histogram</td><td>{@code store}
 *       ({@code memory}, {@code jdbc}, {@code redis}), {@code operation} ({@code claim}, {@code
 *       complete}, {@code release}, {@code extend}, {@code claim_all}, ...)</td><td>the store's
 *       time per call</td></tr>
 *   <tr><td>{@value #ACTIVE}</td><td>gauge</td><td></td><td>calls in flight</td></tr>
 * </table>
 *
 * <p>The observation {@value #OBSERVATION} has the low-cardinality key values {@code operation},
 * {@code outcome} and {@code store}; with a tracing bridge it gives one span per call, and on the
 * blocking path the sender runs inside it, so the provider client's spans are its children. Tag
 * values are never keys, digests, results or provider keys: the operation is a validated
 * low-cardinality name, the rest come from fixed sets.
 *
 * <p>{@code CLAIMED} events are not counted: every first claim ends as {@code sent}, {@code
 * released} or another outcome. {@code takeover}, {@code waited}, {@code lease_overrun} and {@code
 * result_not_stored} are signals counted beside a call's outcome.
 *
 * <p>Thread-safe; meters are registered on first use.
 */
public final class MicrometerIdempotencyObserver implements IdempotencyObserver {

  /** The counter of calls by operation and outcome. */
  public static final String CALLS = "idempotency.calls";

  /** The timer of senders by operation and result. */
  public static final String SEND = "idempotency.send";

  /** The timer of store operations by store and operation. */
  public static final String STORE = "idempotency.store";

  /** The gauge of calls in flight. */
  public static final String ACTIVE = "idempotency.calls.active";

  /** The name of the observation around each call. */
  public static final String OBSERVATION = "idempotency.execute";

  private static final Set<IdempotencyEvent.Type> CALL_OUTCOMES =
      EnumSet.of(
          IdempotencyEvent.Type.COMPLETED,
          IdempotencyEvent.Type.REPLAYED,
          IdempotencyEvent.Type.IN_PROGRESS_CONFLICT,
          IdempotencyEvent.Type.KEY_REUSE,
          IdempotencyEvent.Type.RELEASED,
          IdempotencyEvent.Type.FAILURE_STORED,
          IdempotencyEvent.Type.FAILURE_REPLAYED,
          IdempotencyEvent.Type.OUTCOME_NOT_RECORDED,
          IdempotencyEvent.Type.OUTCOME_UNKNOWN,
          IdempotencyEvent.Type.STORE_ERROR,
          IdempotencyEvent.Type.FAIL_OPEN_SEND);

  private final MeterRegistry meters;
  private final ObservationRegistry observations;
  private final AtomicInteger active = new AtomicInteger();
  private final Map<String, Counter> calls = new ConcurrentHashMap<>();
  private final Map<String, Timer> sends = new ConcurrentHashMap<>();
  private final Map<String, Timer> stores = new ConcurrentHashMap<>();

  private MicrometerIdempotencyObserver(Builder builder) {
    this.meters = builder.meters;
    this.observations = builder.observations;
    Gauge.builder(ACTIVE, active, AtomicInteger::get)
        .description("Guarded calls in flight")
        .register(meters);
  }

  /**
   * Starts a builder.
   *
   * @param meters where the meters go
   * @return a builder
   */
  public static Builder builder(MeterRegistry meters) {
    return new Builder(Objects.requireNonNull(meters, "meters must not be null"));
  }

  /**
   * The {@code outcome} tag of an event type: {@code sent}, {@code replayed}, {@code in_progress},
   * {@code key_reused}, or the type's name in lower case.
   *
   * @param type the event type
   * @return the tag value
   */
  public static String outcome(IdempotencyEvent.Type type) {
    return switch (type) {
      case COMPLETED -> "sent";
      case REPLAYED -> "replayed";
      case IN_PROGRESS_CONFLICT -> "in_progress";
      case KEY_REUSE -> "key_reused";
      default -> type.name().toLowerCase(Locale.ROOT);
    };
  }

  @Override
  public void onEvent(IdempotencyEvent event) {
    IdempotencyEvent.Type type = event.type();
    if (type == IdempotencyEvent.Type.CLAIMED) {
      return;
    }
    String operation = event.operation();
    String outcome = outcome(type);
    calls
        .computeIfAbsent(
            operation + '\u0000' + outcome,
            k ->
                Counter.builder(CALLS)
                    .description("Guarded calls by operation and outcome")
                    .tag("operation", operation)
                    .tag("outcome", outcome)
                    .register(meters))
        .increment();
    switch (type) {
      case COMPLETED -> send(operation, "success").record(event.duration());
      case RELEASED, FAILURE_STORED -> send(operation, "failure").record(event.duration());
      default -> {}
    }
  }

  private Timer send(String operation, String result) {
    return sends.computeIfAbsent(
        operation + '\u0000' + result,
        k ->
            Timer.builder(SEND)
                .description("The sender's time by operation and result")
                .tag("operation", operation)
                .tag("result", result)
                .register(meters));
  }

  @Override
  public CallObservation onCallStart(String operation, String store) {
    active.incrementAndGet();
    Observation observation =
        Observation.createNotStarted(OBSERVATION, observations)
            .contextualName("idempotency " + operation)
            .lowCardinalityKeyValue("operation", operation)
            .lowCardinalityKeyValue("store", store)
            .start();
    return new Call(observation);
  }

  @Override
  public void onStoreOperation(String store, String operation, long nanos, Throwable failure) {
    stores
        .computeIfAbsent(
            store + '\u0000' + operation,
            k ->
                Timer.builder(STORE)
                    .description("The store's time per operation")
                    .tag("store", store)
                    .tag("operation", operation)
                    .publishPercentileHistogram()
                    .maximumExpectedValue(Duration.ofSeconds(10))
                    .register(meters))
        .record(nanos, TimeUnit.NANOSECONDS);
  }

  /** One call's observation; it ends with the call's outcome. */
  private final class Call implements CallObservation {
    private final Observation observation;
    private volatile String outcome = "error";

    Call(Observation observation) {
      this.observation = observation;
    }

    @Override
    public void onEvent(IdempotencyEvent event) {
      if (CALL_OUTCOMES.contains(event.type())) {
        outcome = outcome(event.type());
      }
    }

    @Override
    public Scope openScope() {
      Observation.Scope scope = observation.openScope();
      return scope::close;
    }

    @Override
    public void onEnd(Throwable failure) {
      observation.lowCardinalityKeyValue("outcome", outcome);
      if (failure != null) {
        observation.error(failure);
      }
      observation.stop();
      active.decrementAndGet();
    }
  }

  /** Builds a {@link MicrometerIdempotencyObserver}. Not thread-safe. */
  public static final class Builder {
    private final MeterRegistry meters;
    private ObservationRegistry observations = ObservationRegistry.NOOP;

    private Builder(MeterRegistry meters) {
      this.meters = meters;
    }

    /**
     * Where the {@value #OBSERVATION} observations go (a tracing bridge makes spans of them).
     * Default {@link ObservationRegistry#NOOP}: none.
     *
     * @param observations the registry
     * @return this builder
     */
    public Builder observationRegistry(ObservationRegistry observations) {
      this.observations = Objects.requireNonNull(observations, "observations must not be null");
      return this;
    }

    /**
     * Builds the observer and registers its gauge.
     *
     * @return the observer
     */
    public MicrometerIdempotencyObserver build() {
      return new MicrometerIdempotencyObserver(this);
    }
  }
}
