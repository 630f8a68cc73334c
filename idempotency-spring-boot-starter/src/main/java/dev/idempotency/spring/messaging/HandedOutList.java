package dev.idempotency.spring.messaging;

import dev.idempotency.Batch;
import java.util.AbstractList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.RandomAccess;
import java.util.function.IntFunction;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The list a batch {@link IdempotentListener} gets: the messages to send, each handed out by the
 * {@link Batch} only when the listener reads it, so that the batch checks its key's lease (renewed
 * first, fenced) just before that message's send, as {@link Batch#toSend()} promises, and not once
 * for the whole list before the first send. A message whose lease lapsed meanwhile (its renewals
 * failed for a lease, and another consumer may have taken it over) is never given to the listener:
 * reading it throws the deferral {@link #lapse} makes, and the batch comes back from it. That holds
 * also for a key whose lease lapses between the batch's two checks ({@code hasNext()}, then {@code
 * next()}).
 *
 * <ol>
 *   <li>Reading element {@code i} hands out, in order, the batch's keys up to element {@code i}'s;
 *       a key the batch skips (it lapsed) is marked lapsed.
 *   <li>Each element handed out gets its {@link dev.idempotency.SendContext} in the contexts the
 *       listener reads through {@link IdempotentDelivery#context(Object)}.
 *   <li>Only elements given to the listener (read) count as sent (before a failed one it names, as
 *       Spring Kafka counts); one handed out but never read is left unreported, so the batch
 *       releases it, and a failed batch comes back from it ({@link #firstUnread()}).
 *   <li>In a container's Kafka transaction, each read is noted for {@link TransactionProduces}: a
 *       record produced in it counts for each message first read since the records before it.
 *   <li>Once the listener returned ({@link #end()}), reading throws an {@link
 *       IllegalStateException}: the container acknowledged the batch, and a message not read before
 *       was not sent by this delivery (its key released). The first such read is logged at WARN,
 *       naming the listener.
 * </ol>
 *
 * Reads are synchronized (a listener may read from a parallel stream); unmodifiable.
 */
final class HandedOutList extends AbstractList<Object> implements RandomAccess {

  private static final Logger log = LoggerFactory.getLogger(IdempotentListener.class);

  private final String listener;
  private final List<Object> elements;
  private final Map<String, Integer> indexOfKey = new HashMap<>();
  private final Iterator<Batch.Item> toSend;
  private final BatchContexts contexts;
  private final IntFunction<RuntimeException> lapse;
  private final Batch.@Nullable Item[] items;
  private final boolean[] lapsed;
  private final boolean[] given;
  private final @Nullable RuntimeException[] deferrals;
  private final @Nullable TransactionProduces produces;
  private int nextToHandOut;
  private boolean ended;
  private boolean warnedLateRead;

  /**
   * @param listener the listener's name, for the error of a read after it returned
   * @param elements the messages to send, in order
   * @param keys each message's key
   * @param batch the batch that claimed them, in the same order
   * @param contexts where each handed-out element's context goes, by identity
   * @param lapse the deferral of element {@code i}, whose lease lapsed before it was read
   * @param produces where each read is noted, in a container's Kafka transaction; or null
   */
  HandedOutList(
      String listener,
      List<Object> elements,
      List<String> keys,
      Batch<?> batch,
      BatchContexts contexts,
      IntFunction<RuntimeException> lapse,
      @Nullable TransactionProduces produces) {
    this.listener = listener;
    this.elements = elements;
    for (int i = 0; i < keys.size(); i++) {
      indexOfKey.put(keys.get(i), i);
    }
    this.toSend = batch.toSend().iterator();
    this.contexts = contexts;
    this.lapse = lapse;
    this.items = new Batch.Item[elements.size()];
    this.lapsed = new boolean[elements.size()];
    this.given = new boolean[elements.size()];
    this.deferrals = new RuntimeException[elements.size()];
    this.produces = produces;
  }

  @Override
  public int size() {
    return elements.size();
  }

  @Override
  public synchronized Object get(int index) {
    Object element = elements.get(index); // checks the index
    if (ended) {
      throw readAfterEnd(index);
    }
    while (items[index] == null && !lapsed[index]) {
      Batch.Item item = nextHandedOut();
      if (item == null) {
        markLapsedBefore(elements.size()); // the batch handed out none of the rest: all lapsed
        break;
      }
      Integer position = indexOfKey.get(item.key());
      if (position == null) {
        continue; // not a message of this list (none is)
      }
      markLapsedBefore(position); // keys the batch skipped on its way here lapsed
      items[position] = item;
      contexts.put(elements.get(position), item.context());
      nextToHandOut = Math.max(nextToHandOut, position + 1);
    }
    if (lapsed[index]) {
      throw deferral(index);
    }
    given[index] = true;
    if (produces != null) {
      produces.read(index);
    }
    return element;
  }

  /**
   * The batch's next key handed out, or {@code null} if it hands out none of the rest: {@code
   * hasNext()} found none, or {@code next()} found that those it had found lapsed since (it checks
   * their leases again, and throws {@link NoSuchElementException} when none is left).
   */
  private Batch.@Nullable Item nextHandedOut() {
    if (!toSend.hasNext()) {
      return null;
    }
    try {
      return toSend.next();
    } catch (NoSuchElementException lapsedSinceHasNext) {
      return null;
    }
  }

  /** Ends the batch: the listener returned (or threw), and its list can no longer be read. */
  synchronized void end() {
    ended = true;
    if (produces != null) {
      produces.end();
    }
  }

  private IllegalStateException readAfterEnd(int index) {
    String fate =
        given[index]
            ? "it was read while the listener ran and counts as sent"
            : "it was not sent by this delivery, and its key was released";
    IllegalStateException failure =
        new IllegalStateException(
            "Listener "
                + listener
                + " read message "
                + index
                + " of its batch after its call ended; the batch is over and "
                + fate
                + ". Read the list within the listener: one that returns normally acknowledges"
                + " every message of its batch, read or not (one that names a failed message gets"
                + " the batch again from there)");
    if (!warnedLateRead) {
      warnedLateRead = true;
      log.warn("{}", failure.getMessage());
    }
    return failure;
  }

  private void markLapsedBefore(int position) {
    for (int i = nextToHandOut; i < position; i++) {
      if (items[i] == null) {
        lapsed[i] = true;
      }
    }
    nextToHandOut = Math.max(nextToHandOut, position);
  }

  /** The first element whose lease lapsed before the listener read it, or -1. */
  synchronized int firstLapsed() {
    for (int i = 0; i < lapsed.length; i++) {
      if (lapsed[i]) {
        return i;
      }
    }
    return -1;
  }

  /** The deferral of lapsed element {@code index}: one per element, thrown at each read. */
  synchronized RuntimeException deferral(int index) {
    if (deferrals[index] == null) {
      deferrals[index] = lapse.apply(index);
    }
    return deferrals[index];
  }

  /** Whether {@code failure} is, or was caused by, a deferral this list threw. */
  synchronized boolean isLapse(Throwable failure) {
    for (Throwable t = failure; t != null; t = t.getCause() == t ? null : t.getCause()) {
      for (RuntimeException deferral : deferrals) {
        if (deferral != null && t == deferral) {
          return true;
        }
      }
    }
    return false;
  }

  /**
   * The first element the listener did not read (a lapsed one, or one it skipped), or -1 if it read
   * them all.
   */
  synchronized int firstUnread() {
    for (int i = 0; i < given.length; i++) {
      if (!given[i]) {
        return i;
      }
    }
    return -1;
  }

  /** The item of element {@code index} if the listener read it (it may have been sent), or null. */
  synchronized Batch.@Nullable Item given(int index) {
    return given[index] ? items[index] : null;
  }
}
