package dev.idempotency.spring.messaging;

import java.util.ArrayList;
import java.util.List;
import java.util.function.ToIntFunction;
import org.jspecify.annotations.Nullable;

/**
 * Which message of a batch listener's list each record produced in its container's Kafka
 * transaction belongs to ({@link KafkaTransactionSends} counts the records): the message whose send
 * was running when it was produced. The starter hands a batch's messages to the listener one by one
 * as it reads them ({@link HandedOutList}), in order, each key's lease checked just before that
 * message's send; so a record produced after the listener read message {@code i}, and before it
 * first read a message after {@code i}, is counted for message {@code i}: the furthest message
 * read, the one whose send was handed out last.
 *
 * <p>After a Kafka batch's stop whose transaction did not commit ({@link
 * ContainerTransactionManager}), the messages before the stop with records counted for them are
 * released (the abort discarded their records), the others recorded (their sends, a provider call,
 * happened). Where that attribution is not known ({@link #attributable}), the whole batch is
 * released, as any record produced in the transaction had it before:
 *
 * <ul>
 *   <li>a record produced before the listener read any message (outside any message's send);
 *   <li>a listener that read every message of its list (of two or more) before its first record: a
 *       copy of the list, or one record for the whole batch; each message may have been sent in it;
 *   <li>a record counted for a message that is not counted as sent (the failed message, or one
 *       after it): the listener read ahead of what it sent, and the record may be an earlier
 *       message's.
 * </ul>
 *
 * What is not told apart: a listener that reads a few messages and then produces one record for
 * them all, before reading the next; its record counts for the last of them. Counted on the
 * consumer's thread and on any the listener reads from; synchronized.
 */
final class TransactionProduces {

  private final KafkaTransactionSends.Sends sends;
  private final long[] produced;
  private long last;
  private long beforeAnyRead;
  private int furthest = -1;
  private int furthestAtFirstRecord = -1;
  private boolean ended;

  /**
   * Starts counting the records produced through {@code sends}'s producer from now on, for a list
   * of {@code size} messages.
   */
  TransactionProduces(KafkaTransactionSends.Sends sends, int size) {
    this.sends = sends;
    this.produced = new long[size];
    this.last = sends.count();
  }

  /** The listener read message {@code index}: what was produced since counts for the one before. */
  synchronized void read(int index) {
    if (ended) {
      return;
    }
    attribute();
    furthest = Math.max(furthest, index);
  }

  /** The listener's call ended: what was produced since the last read counts for it. */
  synchronized void end() {
    if (!ended) {
      attribute();
      ended = true;
    }
  }

  private void attribute() {
    long now = sends.count();
    long added = now - last;
    last = now;
    if (added <= 0) {
      return;
    }
    if (furthest < 0) {
      beforeAnyRead += added;
      return;
    }
    if (furthestAtFirstRecord < 0) {
      furthestAtFirstRecord = furthest;
    }
    produced[furthest] += added;
  }

  /** Whether the listener produced any record in the transaction during its call. */
  synchronized boolean any() {
    return beforeAnyRead > 0 || furthestAtFirstRecord >= 0;
  }

  /**
   * Whether each record is known to belong to a message counted as sent (see the class comment).
   *
   * @param sent the indexes of the messages counted as sent
   */
  synchronized boolean attributable(boolean[] sent) {
    if (beforeAnyRead > 0) {
      return false;
    }
    if (produced.length > 1 && furthestAtFirstRecord == produced.length - 1) {
      return false;
    }
    for (int i = 0; i < produced.length; i++) {
      if (produced[i] > 0 && !sent[i]) {
        return false;
      }
    }
    return true;
  }

  /**
   * The items of {@code sent} no record was counted for, in order, or {@code null} if the records
   * cannot be attributed ({@link #attributable}): then every message may have produced.
   *
   * @param indexOf an item's index in the listener's list
   */
  <T> @Nullable List<T> withoutRecords(List<T> sent, ToIntFunction<T> indexOf) {
    boolean[] counted = new boolean[produced.length];
    for (T item : sent) {
      counted[indexOf.applyAsInt(item)] = true;
    }
    synchronized (this) {
      if (!attributable(counted)) {
        return null;
      }
      List<T> without = new ArrayList<>();
      for (T item : sent) {
        if (produced[indexOf.applyAsInt(item)] == 0) {
          without.add(item);
        }
      }
      return without;
    }
  }
}
