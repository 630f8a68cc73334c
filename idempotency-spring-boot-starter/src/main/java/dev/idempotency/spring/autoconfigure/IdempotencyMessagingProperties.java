package dev.idempotency.spring.autoconfigure;

import dev.idempotency.spring.messaging.DeliveryBackOff;
import java.time.Duration;
import org.springframework.boot.context.properties.ConfigurationProperties;

/**
 * The {@code idempotency.messaging.*} settings of {@link
 * dev.idempotency.spring.messaging.IdempotentListener} message listeners. Durations take Boot's
 * formats ({@code PT1S}, {@code 1s}).
 */
@ConfigurationProperties("idempotency.messaging")
public class IdempotencyMessagingProperties {

  /** The message header that carries the key of listeners that name neither key nor header. */
  private String header = "Idempotency-Key";

  /**
   * What a delivery whose key failed permanently before gets: acknowledge (without running the
   * listener), or dead-letter (the broker's dead-letter policy takes it).
   */
  private StoredFailure storedFailure = StoredFailure.ACKNOWLEDGE;

  private final BackOff backOff = new BackOff();

  /**
   * The header.
   *
   * @return the header name
   */
  public String getHeader() {
    return header;
  }

  /**
   * Sets the header.
   *
   * @param header the header name
   */
  public void setHeader(String header) {
    this.header = header;
  }

  /**
   * What a stored permanent failure gets.
   *
   * @return the choice
   */
  public StoredFailure getStoredFailure() {
    return storedFailure;
  }

  /**
   * Sets what a stored permanent failure gets.
   *
   * @param storedFailure the choice
   */
  public void setStoredFailure(StoredFailure storedFailure) {
    this.storedFailure = storedFailure;
  }

  /**
   * The backoff of deferred deliveries.
   *
   * @return the settings
   */
  public BackOff getBackOff() {
    return backOff;
  }

  /** What a delivery whose key holds a stored permanent failure gets. */
  public enum StoredFailure {
    /** Acknowledged without running the listener. */
    ACKNOWLEDGE,
    /** Refused, so that the broker's dead-letter policy takes it. */
    DEAD_LETTER
  }

  /**
   * When a deferred delivery (its key in flight elsewhere, the store down) comes back: after {@code
   * initial}, then {@code multiplier} times longer each time, at most {@code max}; never given up.
   */
  public static class BackOff {

    /** The first pause. */
    private Duration initial = Duration.ofSeconds(1);

    /** The growth of the pause at each deferral of the same delivery. */
    private double multiplier = 2.0;

    /**
     * The longest pause. On Kafka it is spent on the consumer's thread: keep it well below {@code
     * max.poll.interval.ms}.
     */
    private Duration max = Duration.ofSeconds(30);

    /**
     * The first pause.
     *
     * @return the pause
     */
    public Duration getInitial() {
      return initial;
    }

    /**
     * Sets the first pause.
     *
     * @param initial the pause
     */
    public void setInitial(Duration initial) {
      this.initial = initial;
    }

    /**
     * The growth.
     *
     * @return the multiplier
     */
    public double getMultiplier() {
      return multiplier;
    }

    /**
     * Sets the growth.
     *
     * @param multiplier the multiplier, at least 1
     */
    public void setMultiplier(double multiplier) {
      this.multiplier = multiplier;
    }

    /**
     * The longest pause.
     *
     * @return the pause
     */
    public Duration getMax() {
      return max;
    }

    /**
     * Sets the longest pause.
     *
     * @param max the pause
     */
    public void setMax(Duration max) {
      this.max = max;
    }

    /**
     * These settings, checked.
     *
     * @return the backoff
     * @throws IllegalArgumentException naming the setting that is wrong
     */
    public DeliveryBackOff toBackOff() {
      return new DeliveryBackOff(initial, multiplier, max);
    }
  }
}
