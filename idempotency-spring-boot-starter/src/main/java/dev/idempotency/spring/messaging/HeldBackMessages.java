package dev.idempotency.spring.messaging;

import dev.idempotency.Batch;
import dev.idempotency.IdempotencyKey;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * The messages (listener name, key and record) a Kafka batch listener failed at, naming them, after
 * it left a message before them unread, for {@link ListenerBatches}. A listener that reads its list
 * out of order (from the last message to the first) fails at such a message at its first read,
 * before it sends the earlier ones, at every delivery. The container is never told a message that
 * was not sent as done, so the next delivery holds the failed message back: the listener gets the
 * messages before it alone, then it alone (the rest comes back after it), so that the earlier
 * messages are sent and the container's tries and recoverer apply to the failed message, not to one
 * the listener never read.
 *
 * <p>In memory and a hint only: it decides where a delivery stops (a deferral of the rest, never a
 * message counted as sent), and a message is forgotten once it was sent. At most {@link #LIMIT}
 * messages are remembered; the oldest go first. A message the container's handler dead-letters is
 * never sent, so its hint stays: it names the message's record (Kafka's topic, partition and
 * offset, which a redelivery keeps), so that a later message of the same key (the dead letter
 * republished) is not held back. Kafka only (a container that commits the messages before the
 * failed one), outside a container transaction.
 *
 * <p>Thread-safe (a synchronized map): one instance serves every batch listener of an application.
 */
final class HeldBackMessages {

  /** How many held-back messages are remembered; the oldest go first. */
  static final int LIMIT = 1024;

  /** The record of a held-back message whose record is not known: any message of its key. */
  private static final String ANY_RECORD = "";

  /** Each held-back message's record, by listener name and key. */
  private final Map<String, String> messages =
      Collections.synchronizedMap(
          new LinkedHashMap<>() {
            private static final long serialVersionUID = 1L;

            @Override
            protected boolean removeEldestEntry(Map.Entry<String, String> eldest) {
              return size() > LIMIT;
            }
          });

  private static String id(ListenerMethod method, String key) {
    return method.name + '\n' + key;
  }

  /**
   * Holds back the message of {@code key} at {@code method}'s next deliveries, until it is sent;
   * {@code record} names it ({@link Delivery#recordIdAt}), or is {@code null} where that is unknown
   * (then any message of its key is held back).
   */
  void holdBack(ListenerMethod method, String key, @Nullable String record) {
    messages.put(id(method, key), record == null ? ANY_RECORD : record);
  }

  /**
   * Whether the message of {@code key} (its record {@code record}, or {@code null} if unknown) is
   * held back at {@code method}'s deliveries.
   */
  boolean holds(ListenerMethod method, String key, @Nullable String record) {
    String held = messages.get(id(method, key));
    return held != null && (held.equals(ANY_RECORD) || record == null || held.equals(record));
  }

  /**
   * The deferral of {@code unreadKey}, the first message the listener left unread before the one
   * its {@code failure} named ({@code namedKey}, its record {@code namedRecord}), which it holds
   * back.
   *
   * <ol>
   *   <li>The batch comes back from the unread message as a deferral, which the container's handler
   *       neither counts as a try nor hands to its recoverer: told the listener's failure there, a
   *       handler that gives no retry dead-lettered that unread message unsent at once
   *       (KafkaBatchHeldBackNotRetryableProbeTest). The failure is a suppressed exception of the
   *       deferral, not its cause: a deferral's causes are the starter's own (with Spring Kafka's
   *       default classification, the deferrals' handler took a cause it classifies as fatal, a
   *       {@code ClassCastException}, for a reason to skip the message:
   *       KafkaDeferralFatalCauseProbeTest).
   *   <li>The named message is held back at the next delivery: the unread ones are sent first, then
   *       it runs alone, and its failures from then on reach the handler at its own index, its
   *       tries and recoverer. Each such deferral holds back another message of the batch (a
   *       held-back one runs alone or not at all), so they end.
   *   <li>Not held back in a container's transaction other than a Kafka one: there the held-back
   *       deferral would roll back the sends before it, release their keys, and the next delivery
   *       would send them again. A Kafka container transaction commits the messages before it
   *       instead ({@link KafkaTransactionBatchStops}; KafkaBatchHeldBackTransactionProbeTest). The
   *       deferral still keeps the handler from recovering (and committing past) a message that was
   *       not sent.
   * </ol>
   */
  DeferredDeliveryException deferUnread(
      ListenerMethod method,
      String unreadKey,
      String namedKey,
      @Nullable String namedRecord,
      Throwable failure) {
    if (!ContainerTransactions.active() || ContainerTransactionManager.inKafkaTransaction()) {
      holdBack(method, namedKey, namedRecord);
    }
    DeferredDeliveryException deferral =
        IdempotentListenerInterceptor.deferred(
            method,
            IdempotencyKey.digest(unreadKey),
            "the listener failed at a later message of its batch before it read this one",
            null);
    deferral.addSuppressed(failure);
    return deferral;
  }

  /** The deferral of held-back message {@code key}: the messages before it run without it first. */
  static RuntimeException heldBack(ListenerMethod method, String key) {
    return IdempotentListenerInterceptor.deferred(
        method,
        IdempotencyKey.digest(key),
        "the listener failed at it last time before reading the messages ahead of it,"
            + " which run without it first",
        null);
  }

  /** The deferral of message {@code key}, after a held-back message that runs alone first. */
  static RuntimeException afterAlone(ListenerMethod method, String key) {
    return IdempotentListenerInterceptor.deferred(
        method,
        IdempotencyKey.digest(key),
        "the message before it, which the listener failed at last time, runs alone first",
        null);
  }

  /** Forgets the held-back messages that were sent. */
  void forget(ListenerMethod method, List<Batch.Item> sent) {
    for (Batch.Item item : sent) {
      messages.remove(id(method, item.key()));
    }
  }
}
