package dev.idempotency.spring.messaging;

import dev.idempotency.Batch;
import dev.idempotency.IdempotencyException;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.IdempotencyStoredFailureException;
import dev.idempotency.KeyStoreException;
import dev.idempotency.ResultCodec;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Supplier;
import org.aopalliance.intercept.MethodInvocation;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Runs a batch {@link IdempotentListener}'s delivery through the guard, for {@link
 * IdempotentListenerInterceptor}.
 *
 * <ol>
 *   <li>The batch's keys are claimed together ({@code claimBatch}, one round trip per chunk).
 *   <li>The listener gets the messages to send, in order, up to the first one that must come back
 *       later, or whose key cannot be read (a poison message, or a failure of code its key
 *       expression calls); where the whole batch fails together, as on RabbitMQ, it gets the
 *       others, and the batch then fails for that message. Each is handed out by the batch as the
 *       listener reads it ({@link HandedOutList}), its lease checked then: one whose lease lapsed
 *       since the claim is never given to the listener, and the batch comes back from it.
 *   <li>Their outcomes are recorded before the container acknowledges; in a listener container's
 *       transaction ({@link ContainerTransactions}) once it committed, and released if it did not.
 *   <li>What failed or must come back is reported as the container expects ({@link Delivery}). A
 *       Kafka batch that failed at a message after one the listener never read comes back as a
 *       deferral from the unread one, then without the failed message at first ({@link
 *       HeldBackMessages}).
 *   <li>On a Kafka, RabbitMQ or JMS consumer's thread, an interrupt the listener left is cleared
 *       before the container acknowledges ({@link ConsumerThreadInterrupts}).
 * </ol>
 *
 * Holds the guard's supplier and the held-back messages; thread-safe.
 */
final class ListenerBatches {

  private static final Logger log = LoggerFactory.getLogger(IdempotentListener.class);

  private final Supplier<IdempotencyGuard> guard;

  /** The messages held back at the next deliveries ({@link HeldBackMessages}). */
  private final HeldBackMessages heldBack = new HeldBackMessages();

  ListenerBatches(Supplier<IdempotencyGuard> guard) {
    this.guard = guard;
  }

  /** What became of one message of a batch before the listener ran. */
  private enum Fate {
    SEND,
    REPLAYED,
    DUPLICATE,
    ACKNOWLEDGED_FAILURE
  }

  /**
   * Runs the batch call; the keys of its elements, in order, are added to {@code keysOut} (if
   * given) once every one was read, for the deferral kept per call ({@link Delivery.KeptDeferral}).
   */
  @Nullable Object run(
      MethodInvocation invocation,
      ListenerMethod method,
      @Nullable Delivery delivery,
      @Nullable List<String> keysOut)
      throws Throwable {
    try {
      return runGuarded(invocation, method, delivery, keysOut);
    } finally {
      // the outcomes were recorded (or their record handed on) with any interrupt held back; on a
      // Kafka, RabbitMQ or JMS consumer's thread the interrupt must not reach the container's
      // acknowledgement and its next wait for messages (it fails every Kafka poll)
      ConsumerThreadInterrupts.clearAfterDelivery(delivery, method.name);
    }
  }

  private @Nullable Object runGuarded(
      MethodInvocation invocation,
      ListenerMethod method,
      @Nullable Delivery delivery,
      @Nullable List<String> keysOut)
      throws Throwable {
    Object[] arguments = invocation.getArguments();
    List<?> elements = (List<?>) arguments[method.batchIndex];
    if (elements == null || elements.isEmpty()) {
      return invocation.proceed();
    }
    Delivery.BatchFailures failures =
        delivery != null && delivery.batch() ? delivery.failures() : Delivery.WHOLE_BATCH;
    int size = elements.size();
    String[] keys = new String[size];
    Map<String, Integer> first = new LinkedHashMap<>();
    List<IdempotencyRequest> requests = new ArrayList<>();
    Duration ttl = method.ttl;
    // a message whose key cannot be read: a poison message (no usable key, not retried), or the
    // failure of code its key expression calls (a look-up that timed out: retried as the
    // listener's own failure). Where the container takes the messages before a failed one as done
    // (Kafka), the batch stops there, as it does for a message that must come back later, and the
    // container's handler takes that message alone, at its index: a poison one at once, another
    // after its tries. Where the whole batch fails together (RabbitMQ), the others run first: the
    // batch then fails for the first such message (or stored failure to dead-letter), rejected
    // (dead-lettered) for a poison one, those sent as completed duplicates, never with a message
    // after it unsent
    boolean wholeBatchFails = !failures.commitsBefore();
    int poison = size;
    RuntimeException poisonCause = null;
    // where each element sits among the messages the container polled (a filter may drop some)
    int[] positions = delivery != null && delivery.batch() ? delivery.positionsOf(elements) : null;
    if (positions == null
        && delivery != null
        && delivery.batch()
        && method.keyReadsHeaders
        && Messages.headersOf(elements.get(0)) == null) {
      // payloads of a filtered batch that cannot be told apart: never read with another's key
      throw failures.failedAt(0, IdempotentListenerInterceptor.unmatchedPayloads(method));
    }
    for (int i = 0; i < size && (poison == size || wholeBatchFails); i++) {
      Object element = elements.get(i);
      Map<String, Object> headers =
          positions != null && delivery != null
              ? delivery.headersOf(positions[i])
              : orEmpty(Messages.headersOf(element));
      try {
        keys[i] = method.elementKey(Messages.payloadOf(element), headers);
      } catch (RuntimeException e) {
        // an InvalidIdempotencyKeyException, or what the called code threw: never out of the
        // delivery without the message's index, or the container fails the whole batch with it
        if (poison == size) {
          poison = i;
          poisonCause = e;
        }
        continue; // its key stays null
      }
      if (first.putIfAbsent(keys[i], i) == null) {
        requests.add(IdempotencyRequest.of(keys[i], ttl).withOperation(method.name));
      }
    }
    if (poisonCause == null && keysOut != null) {
      keysOut.addAll(Arrays.asList(keys)); // every element's key was read
    }

    if (poisonCause != null
        && failures.commitsBefore()
        && ContainerTransactions.containerLocal()
        && !ContainerTransactionManager.inKafkaTransaction()
        && !lastPolled(delivery, positions, poison, size)) {
      // in a transaction around the container other than a Kafka one (which commits the messages
      // before a stop, KafkaTransactionBatchStops), nothing claimed or sent yet: the batch comes
      // back whole
      throw failures.failedAt(
          polledIndex(positions, 0), poisonInTransaction(method, poison, size, poisonCause));
    }
    if (requests.isEmpty()) {
      // the first message is the poison one (every message is, where the whole batch fails)
      throw failures.failedAt(polledIndex(positions, 0), poisonCause);
    }
    Batch<String> batch;
    try {
      batch = guard.get().claimBatch(requests, ResultCodec.string());
    } catch (KeyStoreException e) {
      throw failures.failedAt(
          polledIndex(positions, 0),
          IdempotentListenerInterceptor.deferred(
              method, "store", "the store could not be asked", e));
    }
    // handed out only as the listener reads each message (HandedOutList), lease checked then
    Set<String> claimed = new HashSet<>(batch.claimedKeys());

    // The messages to run, in order, up to the first that must come back later or fail.
    BatchListenerRun run = new BatchListenerRun(method, heldBack, batch, failures);
    int stop = size;
    RuntimeException stopCause = null;
    int replays = 0;
    // a held-back message (heldBack) at the head of the messages to send runs alone
    boolean alone = false;
    for (int i = 0; i < size && stop == size; i++) {
      if (keys[i] == null) {
        if (!wholeBatchFails) {
          stop = i;
          stopCause = poisonCause;
        }
        continue;
      }
      if (alone) {
        stop = i;
        stopCause = HeldBackMessages.afterAlone(method, keys[i]);
        continue;
      }
      String key = keys[i];
      Fate fate;
      if (first.get(key) != i) {
        fate = Fate.DUPLICATE;
      } else if (claimed.contains(key)) {
        fate = Fate.SEND;
      } else if (batch.replayed().containsKey(key)) {
        fate = Fate.REPLAYED;
      } else {
        IdempotencyException refused = batch.refused().get(key);
        if (refused instanceof IdempotencyStoredFailureException
            && wholeBatchFails
            && !method.acknowledgeStoredFailure) {
          // a stored failure to dead-letter rejects the whole batch, as a poison message does:
          // the others run first, never dead-lettered unsent with it
          if (i < poison) {
            poison = i;
            poisonCause = refused;
          }
          continue;
        }
        if (refused instanceof IdempotencyStoredFailureException stored
            && method.acknowledgeStoredFailure) {
          log.info(
              "Listener {} acknowledged a message of key {} without running: its first delivery"
                  + " failed permanently ({})",
              method.name,
              stored.keyDigest(),
              stored.failureType());
          fate = Fate.ACKNOWLEDGED_FAILURE;
        } else {
          stop = i;
          stopCause = stopCause(method, key, refused);
          continue;
        }
      }
      if (fate == Fate.SEND
          && failures.commitsBefore()
          && heldBack.holds(method, key, recordOf(delivery, positions, i))) {
        if (!run.isEmpty()) {
          // the listener failed at it last time before reading these: they run without it
          stop = i;
          stopCause = HeldBackMessages.heldBack(method, key);
          continue;
        }
        alone = true;
      }
      if (fate == Fate.SEND) {
        run.add(
            elements.get(i), key, i, polledIndex(positions, i), recordOf(delivery, positions, i));
      } else if (fate == Fate.REPLAYED || fate == Fate.DUPLICATE) {
        replays++;
      }
    }
    if (stop == size && poisonCause != null) {
      // the whole batch fails together: rejected for its poison message once the others ran
      stop = poison;
      stopCause = poisonCause;
    }
    if (replays > 0) {
      log.debug(
          "Listener {} skipped {} message(s) of a batch of {}: sent before",
          method.name,
          replays,
          size);
    }

    Object result = null;
    // in a container's transaction the outcomes wait for its end: recorded after the commit, and
    // released (recordReleasingUnreported() releases what was never reported) after a rollback
    boolean inTransaction = !run.isEmpty() && ContainerTransactions.active();
    List<Batch.Item> sent = run.sent();
    // a listener's manual acknowledgement (Kafka) is held: it acknowledges the list it got, which
    // the container takes for the whole polled batch, and a nack names an index in that list
    HeldAcknowledgment acknowledgment =
        run.isEmpty() ? null : Messages.holdAcknowledgment(arguments, run.size(), run::polledIndex);
    boolean nacked = false;
    // the records the listener produces in the container's Kafka transaction, by message (null:
    // none, or its producer not known): which it produced decides what a stop's rollback releases
    KafkaTransactionSends.Sends sends =
        inTransaction ? ContainerTransactionManager.kafkaTransactionSends() : null;
    TransactionProduces produces =
        sends != null ? new TransactionProduces(sends, run.size()) : null;
    try {
      if (!run.isEmpty()) {
        result = run.run(invocation, arguments, acknowledgment, produces);
        nacked = acknowledgment != null && acknowledgment.nackedAt() >= 0;
      } else if (stopCause == null) {
        Messages.acknowledgeSkipped(arguments);
      }
    } finally {
      heldBack.forget(method, sent);
      if (inTransaction) {
        ContainerTransactions.onCompletion(
            new ContainerTransactions.Completion() {
              @Override
              public void stopNotCommitted() {
                recordStopped(method, batch, sent, run, produces);
              }

              @Override
              public void committed() {
                recordBatch(batch, sent);
              }

              @Override
              public void rolledBack() {
                log.debug(
                    "Listener {} released the keys of a batch of {}: the container's transaction"
                        + " did not commit",
                    method.name,
                    size);
                batch.recordReleasingUnreported();
              }

              @Override
              public void abandoned() {
                // JMS, whose session commits can end so, has no batch listeners: left unrecorded,
                // the batch's keys are renewed up to the guard's renewal limit, then run out
                log.warn(
                    "Listener {} left the keys of a batch of {} claimed: its container's"
                        + " transaction can no longer commit",
                    method.name,
                    size);
              }
            });
      } else {
        recordBatch(batch, sent);
      }
    }
    if (nacked) {
      // the nack (passed on) brings the batch back from a message before the stop, if any
      return result;
    }
    if (stopCause != null) {
      // not acknowledged: the container commits the messages before the stop, not the rest
      throw failures.failedAt(polledIndex(positions, stop), stopCause);
    }
    if (acknowledgment != null && acknowledgment.acknowledged()) {
      acknowledgment.passAcknowledgement();
    }
    return result;
  }

  /**
   * Element {@code i}'s index among the messages the container polled, or {@code i} itself where
   * that is unknown: no earlier polled message is then left undone (each was filtered out or came
   * before element {@code i} in the listener's list).
   */
  private static int polledIndex(int @Nullable [] positions, int i) {
    return positions != null ? positions[i] : i;
  }

  /**
   * Element {@code i}'s polled record as the container names it ({@link Delivery#recordIdAt}), or
   * {@code null} where that is unknown.
   */
  private static @Nullable String recordOf(
      @Nullable Delivery delivery, int @Nullable [] positions, int i) {
    return delivery != null && positions != null ? delivery.recordIdAt(positions[i]) : null;
  }

  /**
   * Whether element {@code i} is the last message the container polled, or may be taken for it:
   * where the positions are unknown, only the last element of a batch the listener got whole.
   */
  private static boolean lastPolled(
      @Nullable Delivery delivery, int @Nullable [] positions, int i, int size) {
    if (delivery == null || !delivery.batch()) {
      return i == size - 1;
    }
    int polled = delivery.polled().isEmpty() ? delivery.headers().size() : delivery.polled().size();
    if (positions != null) {
      return positions[i] == polled - 1;
    }
    return delivery.polled().isEmpty() && i == size - 1;
  }

  /**
   * The deferral of a Kafka batch, in a transaction of its container that is not a Kafka one (a
   * JDBC or JPA transaction manager on it), whose message {@code poison} (not the last polled) has
   * a key that cannot be read (no usable key, or the called code's failure). Reported at that
   * message, it would be recovered (dead-letter topic) by the container's error handler, at once or
   * after its tries, which then throws to seek the records after it: that rolls the transaction
   * back (the dead letter, and the sends before it with their keys released), the after-rollback
   * processor seeks the whole batch back, and every delivery sent the messages before it again (as
   * it did in a Kafka container transaction before KafkaTransactionBatchStops). Its offsets and
   * those before it are committed outside the transaction by the handler, so a restart would skip
   * the messages before it unsent. So the batch comes back whole from its first message as a
   * deferral, which the handler neither counts nor recovers nor commits past, with its backoff,
   * before anything is claimed or sent: no message is sent twice or skipped unsent, and the
   * partition stalls at this batch until that key can be read (the listener changes, or the look-up
   * answers; logged at WARN).
   */
  private static DeferredDeliveryException poisonInTransaction(
      ListenerMethod method, int poison, int size, RuntimeException cause) {
    log.warn(
        "Listener {} cannot run a batch of {} in its container's transaction: the key of"
            + " message {} cannot be read ({}), and the dead letter of a message that is not the"
            + " last of its batch would roll back the sends before it; nothing ran and the batch"
            + " comes back. Take records one at a time, or key the listener so that its keys"
            + " cannot fail",
        method.name,
        size,
        poison,
        cause.getClass().getSimpleName());
    DeferredDeliveryException deferral =
        IdempotentListenerInterceptor.deferred(
            method,
            "poison",
            "the key of a message of its batch cannot be read, in its container's transaction",
            null);
    deferral.addSuppressed(cause);
    return deferral;
  }

  private static Map<String, Object> orEmpty(@Nullable Map<String, Object> headers) {
    return headers == null ? Map.of() : headers;
  }

  /** Why message {@code key} of a batch may not run now: deferred, or refused. */
  private static RuntimeException stopCause(
      ListenerMethod method, String key, @Nullable IdempotencyException refused) {
    String digest = IdempotencyKey.digest(key);
    if (refused == null) {
      return IdempotentListenerInterceptor.deferred(
          method,
          digest,
          "the key is being sent by another consumer",
          IdempotencyInProgressException.afterWaiting(digest, Duration.ZERO, null));
    }
    if (refused instanceof KeyStoreException storeFailure) {
      return IdempotentListenerInterceptor.deferred(
          method, "store", "the store could not be asked; nothing ran", storeFailure);
    }
    return refused; // a stored failure to dead-letter, an unknown outcome (strict mode), ...
  }

  /**
   * Records the messages before a Kafka batch's stop whose container transaction did not commit:
   * those sent outside it, whose redelivery must be a replay; and releases those whose records the
   * abort discarded ({@link TransactionProduces}), or every one where they cannot be told apart.
   */
  private static void recordStopped(
      ListenerMethod method,
      Batch<String> batch,
      List<Batch.Item> sent,
      BatchListenerRun run,
      @Nullable TransactionProduces produces) {
    if (produces == null || !produces.any()) {
      log.warn(
          "The Kafka container transaction of a batch that stopped partway did not commit (see"
              + " the container's log): listener {}'s messages before the stop, sent outside it,"
              + " are recorded all the same, so their redelivery is a replay",
          method.name);
      recordBatch(batch, sent);
      return;
    }
    List<Batch.Item> outside = produces.withoutRecords(sent, run::indexOf);
    if (outside == null) {
      log.warn(
          "The Kafka container transaction of a batch that stopped partway did not commit (see"
              + " the container's log): listener {} produced records in it, which its abort"
              + " discarded, and which messages they were for is not known (produced before the"
              + " listener read a message, or after it had read ahead), so the messages before the"
              + " stop are released and sent again at their redelivery",
          method.name);
      batch.recordReleasingUnreported();
      return;
    }
    log.warn(
        "The Kafka container transaction of a batch that stopped partway did not commit (see the"
            + " container's log): of listener {}'s {} message(s) before the stop, {} produced"
            + " records in it, which its abort discarded: released and produced again at their"
            + " redelivery; the others, sent outside it, are recorded, so their redelivery is a"
            + " replay",
        method.name,
        sent.size(),
        sent.size() - outside.size());
    recordBatch(batch, outside);
  }

  /**
   * Reports the messages sent as succeeded, and writes the batch's outcomes. The listener's call
   * has ended (its list can no longer be read), so a message it read on this thread and that is not
   * among {@code sent} was not sent, or its send was undone: its key is released, so that its
   * redelivery sends it ({@link Batch#recordReleasingUnreported()}; {@code record()} would leave it
   * claimed, since a plain send loop's unreported key may still be being sent elsewhere).
   */
  private static void recordBatch(Batch<String> batch, List<Batch.Item> sent) {
    for (Batch.Item item : sent) {
      batch.succeeded(item, null);
    }
    batch.recordReleasingUnreported();
  }
}
