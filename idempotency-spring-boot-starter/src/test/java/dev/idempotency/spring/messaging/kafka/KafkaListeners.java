package dev.idempotency.spring.messaging.kafka;

import dev.idempotency.spring.messaging.BatchDeliveryFailedException;
import dev.idempotency.spring.messaging.IdempotentDelivery;
import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.IdempotentListener.StoredFailure;
import dev.idempotency.spring.messaging.Sends;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.springframework.kafka.annotation.KafkaListener;

/** The Kafka test application's listeners: each sends through {@link Sends}. */
public class KafkaListeners {

  static final String RECORD = "kafka-record";
  static final String DEAD_LETTER = "kafka-dead-letter";
  static final String HEADER = "KafkaListeners.fromHeader";
  static final String KEYED = "kafka-keyed";
  static final String BATCH = "kafka-batch";
  static final String FILTERED = "kafka-filtered-batch";
  static final String RECORD_LIST = "kafka-record-list";
  static final String CONVERTED_KEY = "kafka-converted-key";
  static final String ENUM_KEY = "kafka-enum-key";
  static final String FRAMES_KEY = "kafka-frames-key";

  /**
   * A tier, an enum of the application's with a static {@code of(Long)} look-up that SpEL's
   * conversion service calls to convert a {@code Long} argument: it fails as many times as {@link
   * #failures} says (a look-up that timed out), then works.
   */
  public enum Tier {
    /** The only tier. */
    GOLD;

    static final java.util.concurrent.atomic.AtomicInteger failures =
        new java.util.concurrent.atomic.AtomicInteger();

    /** The look-up the conversion service calls for a Long argument. */
    public static Tier of(Long code) {
      if (failures.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
        throw new IllegalStateException("the tier look-up timed out (transient)");
      }
      return GOLD;
    }

    /** The key of a tier's notice. */
    public static String keyOf(Tier tier, String event) {
      return tier + "-" + event;
    }
  }

  /**
   * A customer, the parameter of the converted-key listener's key method: SpEL converts the payload
   * to one through its static {@code valueOf}, a look-up that times out once for a payload holding
   * {@code flaky}.
   */
  public static final class Customer {
    static final Set<String> failedOnce = ConcurrentHashMap.newKeySet();

    final String id;

    private Customer(String id) {
      this.id = id;
    }

    /** The look-up the conversion service calls for a String argument. */
    public static Customer valueOf(String id) {
      if (id.contains("flaky") && failedOnce.add(id)) {
        throw new IllegalStateException("the customer look-up timed out (transient)");
      }
      return new Customer(id);
    }

    /** The key of a customer's notice. */
    public static String keyOf(Customer customer) {
      return "customer-" + customer.id;
    }
  }

  private final Sends sends;

  KafkaListeners(Sends sends) {
    this.sends = sends;
  }

  @KafkaListener(id = RECORD, topics = "idem.record")
  @IdempotentListener(name = RECORD, key = "#event")
  public void record(String event) {
    sends.send(RECORD, event, IdempotentDelivery.context());
  }

  @KafkaListener(id = DEAD_LETTER, topics = "idem.dead-letter")
  @IdempotentListener(name = DEAD_LETTER, key = "#event", storedFailure = StoredFailure.DEAD_LETTER)
  public void deadLetter(String event) {
    sends.send(DEAD_LETTER, event, IdempotentDelivery.context());
  }

  @KafkaListener(id = KEYED, topics = "idem.keyed")
  @IdempotentListener(
      name = KEYED,
      key = "T(dev.idempotency.spring.messaging.KeyEvaluations).keyOf(#event)")
  public void keyed(String event) {
    sends.send(KEYED, event, IdempotentDelivery.context());
  }

  /** Keyed through a conversion of its payload that runs the application's look-up. */
  @KafkaListener(id = CONVERTED_KEY, topics = "idem.converted-key")
  @IdempotentListener(
      name = CONVERTED_KEY,
      key = "T(dev.idempotency.spring.messaging.kafka.KafkaListeners$Customer).keyOf(#event)")
  public void convertedKey(String event) {
    sends.send(CONVERTED_KEY, event, IdempotentDelivery.context());
  }

  /** Keyed through a conversion of a Long to the application's enum by its own look-up. */
  @KafkaListener(id = ENUM_KEY, topics = "idem.enum-key")
  @IdempotentListener(
      name = ENUM_KEY,
      key =
          "T(dev.idempotency.spring.messaging.kafka.KafkaListeners$Tier)"
              + ".keyOf(#event.length() + 0L, #event)")
  public void enumKey(String event) {
    sends.send(ENUM_KEY, event, IdempotentDelivery.context());
  }

  /**
   * Keyed through a conversion that runs one of the application's look-ups of {@link
   * dev.idempotency.spring.KeyConversionLookUps}, picked by the payload's prefix (probeL).
   */
  @KafkaListener(id = FRAMES_KEY, topics = "idem.frames-key")
  @IdempotentListener(name = FRAMES_KEY, key = dev.idempotency.spring.KeyConversionLookUps.KEY)
  public void framesKey(String event) {
    sends.send(FRAMES_KEY, event, IdempotentDelivery.context());
  }

  @KafkaListener(id = "kafka-header", topics = "idem.header")
  @IdempotentListener
  public void fromHeader(String event) {
    sends.send(HEADER, event, IdempotentDelivery.context());
  }

  /**
   * A record listener whose payload is a list (the record's comma-separated value, converted by
   * Spring's conversion service), keyed by its header: one key, the whole list (issue 37,
   * probe45a).
   */
  @KafkaListener(id = RECORD_LIST, topics = "idem.record-list")
  @IdempotentListener(name = RECORD_LIST, header = "Idempotency-Key")
  public void recordList(List<String> lines) {
    sends.send(RECORD_LIST, String.join(",", lines), IdempotentDelivery.context());
  }

  @KafkaListener(id = BATCH, topics = "idem.batch", batch = "true", autoStartup = "false")
  @IdempotentListener(name = BATCH, key = "#payload")
  public void batch(List<String> events) {
    for (int i = 0; i < events.size(); i++) {
      String event = events.get(i);
      try {
        sends.send(BATCH, event, IdempotentDelivery.context(event));
      } catch (RuntimeException failure) {
        throw new BatchDeliveryFailedException(i, failure);
      }
    }
  }

  /**
   * A batch listener behind a {@code RecordFilterStrategy} (bean {@code skipMarked}, which drops
   * payloads starting with {@code skip}), keyed by the {@code Idempotency-Key} header: it gets a
   * shorter list than the records the container polled.
   */
  @KafkaListener(
      id = FILTERED,
      topics = "idem.filtered",
      batch = "true",
      filter = "skipMarked",
      autoStartup = "false")
  @IdempotentListener(name = FILTERED)
  public void filteredBatch(List<String> events) {
    for (int i = 0; i < events.size(); i++) {
      String event = events.get(i);
      try {
        sends.send(FILTERED, event, IdempotentDelivery.context(event));
      } catch (RuntimeException failure) {
        throw new BatchDeliveryFailedException(i, failure);
      }
    }
  }
}
