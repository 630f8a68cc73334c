package dev.idempotency.spring.messaging;

import dev.idempotency.Batch;
import dev.idempotency.IdempotencyKey;
import java.util.ArrayList;
import java.util.List;
import org.aopalliance.intercept.MethodInvocation;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The messages of one batch delivery that a batch {@link IdempotentListener} gets, chosen by {@link
 * ListenerBatches}: in order, each with its key, its index among the messages the container polled
 * and its record where known (Kafka's topic, partition and offset); and the listener's call with
 * them ({@link #run}), which tells which of them were sent ({@link #sent()}). One per delivery, on
 * the consumer's thread.
 */
final class BatchListenerRun {

  private static final Logger log = LoggerFactory.getLogger(IdempotentListener.class);

  private final ListenerMethod method;
  private final HeldBackMessages heldBack;
  private final Batch<String> batch;
  private final Delivery.BatchFailures failures;
  private final List<Object> messages = new ArrayList<>();
  private final List<String> keys = new ArrayList<>();
  private final List<Integer> polledIndexes = new ArrayList<>();
  private final List<Integer> listIndexes = new ArrayList<>();
  private final List<@Nullable String> records = new ArrayList<>();
  private final List<Batch.Item> sent = new ArrayList<>();

  BatchListenerRun(
      ListenerMethod method,
      HeldBackMessages heldBack,
      Batch<String> batch,
      Delivery.BatchFailures failures) {
    this.method = method;
    this.heldBack = heldBack;
    this.batch = batch;
    this.failures = failures;
  }

  /**
   * Adds a message to send: its key, its index in the list the container made (the listener's
   * header lists' index too), its index among the polled messages, its record.
   */
  void add(Object message, String key, int listIndex, int polledIndex, @Nullable String record) {
    messages.add(message);
    keys.add(key);
    listIndexes.add(listIndex);
    polledIndexes.add(polledIndex);
    records.add(record);
  }

  boolean isEmpty() {
    return messages.isEmpty();
  }

  int size() {
    return messages.size();
  }

  /** Message {@code i}'s index among the messages the container polled. */
  int polledIndex(int i) {
    return polledIndexes.get(i);
  }

  /** Message {@code item}'s index in the listener's list. */
  int indexOf(Batch.Item item) {
    return keys.indexOf(item.key());
  }

  /** The items of the messages the listener read and so may have sent, once {@link #run} ended. */
  List<Batch.Item> sent() {
    return sent;
  }

  /**
   * Runs the listener with the messages to send, each handed out as it reads it ({@link
   * HandedOutList}); adds to {@link #sent()} those it read and so may have sent (all of them, or
   * those before the one a failure names), and reports a named failure to the batch. A message
   * whose lease lapsed before the listener read it stops the batch there: it comes back, deferred.
   * A failed batch comes back from its first message that was named, lapsed or never read, never
   * later: a container that commits the messages before that index (Kafka) must not commit one the
   * listener never read, as it was not sent. Once the listener's call ended, its list can no longer
   * be read. In a container's Kafka transaction whose producer is known, {@code produces} notes
   * each read, so that each record produced in it counts for its message.
   */
  @Nullable Object run(
      MethodInvocation invocation,
      Object[] arguments,
      @Nullable HeldAcknowledgment acknowledgment,
      @Nullable TransactionProduces produces)
      throws Throwable {
    BatchContexts contexts = new BatchContexts(method.name, messages);
    HandedOutList view =
        new HandedOutList(
            method.name,
            messages,
            keys,
            batch,
            contexts,
            i ->
                IdempotentListenerInterceptor.deferred(
                    method,
                    IdempotencyKey.digest(keys.get(i)),
                    "its lease lapsed before its send could start (not renewed in time); nothing"
                        + " was sent",
                    null),
            produces);
    Object original = arguments[method.batchIndex];
    // each header list beside the list (record keys, offsets, converted headers) cut down to the
    // same messages, so that entry i stays message i's
    Object[] headerArguments =
        BatchHeaderArguments.align(
            method, arguments, original instanceof List<?> list ? list.size() : 0, listIndexes);
    arguments[method.batchIndex] = view;
    BatchContexts previous = IdempotentDelivery.bindBatch(contexts);
    Object result;
    try {
      result = invocation.proceed();
    } catch (Throwable failure) {
      int named =
          failure instanceof BatchDeliveryFailedException ours && ours.index() < messages.size()
              ? ours.index()
              : failures.indexIn(failure, messages);
      int lapsed = view.firstLapsed();
      if (lapsed >= 0 && (named < 0 ? view.isLapse(failure) : lapsed <= named)) {
        // the batch comes back from the lapsed message; what was read before the failure is sent
        addGiven(view, named < 0 ? messages.size() : named, sent);
        Batch.Item failed = named > lapsed ? view.given(named) : null;
        if (failed != null) {
          batch.failed(failed, causeOf(failure));
        }
        // from the first message not read: the lapsed one, or one before it the listener skipped
        throw failures.failedAt(polledIndexes.get(view.firstUnread()), view.deferral(lapsed));
      }
      if (named < 0) {
        // nothing says which messages went out: every key is released, the batch comes back
        log.debug(
            "Listener {} failed a batch of {}; its keys are released",
            method.name,
            messages.size());
        throw failure;
      }
      addGiven(view, named, sent);
      Batch.Item failed = view.given(named);
      if (failed != null) {
        batch.failed(failed, causeOf(failure));
      }
      int unread = view.firstUnread();
      if (unread >= 0 && unread < named && failures.commitsBefore()) {
        // a message before the named one was never read, so never sent (its key is released):
        // the batch comes back from it, deferred, and the named one is held back
        throw failures.failedAt(
            polledIndexes.get(unread),
            heldBack.deferUnread(
                method, keys.get(unread), keys.get(named), records.get(named), failure));
      }
      throw failures.failedAt(polledIndexes.get(named), causeOf(failure));
    } finally {
      // the batch is over: a read from now on (another thread the listener handed its list to)
      // fails at once, as its message is no longer this delivery's to send
      view.end();
      IdempotentDelivery.restoreBatch(previous);
      arguments[method.batchIndex] = original;
      BatchHeaderArguments.restore(arguments, headerArguments, method.batchIndex);
      if (acknowledgment != null) {
        acknowledgment.restore();
      }
    }
    int nacked = acknowledgment != null ? acknowledgment.nackedAt() : -1;
    if (nacked >= 0) {
      // the listener nacked (Kafka, manual acknowledgement): the messages from that index on come
      // back, as does any before it that it did not read or whose lease lapsed; the rest were sent
      int from = nacked;
      int unread = view.firstUnread();
      if (unread >= 0 && unread < from) {
        from = unread;
      }
      addGiven(view, from, sent);
      log.debug(
          "Listener {} nacked its batch at message {} of {}; the messages from there come back",
          method.name,
          from,
          messages.size());
      acknowledgment.passNack(polledIndexes.get(from));
      return result;
    }
    addGiven(view, messages.size(), sent);
    int lapsed = view.firstLapsed();
    if (lapsed >= 0) {
      // the listener went on past a message whose lease lapsed: the batch comes back from it, or
      // from a message before it that the listener did not read
      throw failures.failedAt(polledIndexes.get(view.firstUnread()), view.deferral(lapsed));
    }
    return result;
  }

  /** Adds to {@code sent} the items of the messages before {@code end} that the listener read. */
  private static void addGiven(HandedOutList view, int end, List<Batch.Item> sent) {
    for (int i = 0; i < end; i++) {
      Batch.Item item = view.given(i);
      if (item != null) {
        sent.add(item);
      }
    }
  }

  /** The cause a batch failure names (the listener's own exception), or the failure itself. */
  private static Throwable causeOf(Throwable failure) {
    return failure.getCause() != null ? failure.getCause() : failure;
  }
}
