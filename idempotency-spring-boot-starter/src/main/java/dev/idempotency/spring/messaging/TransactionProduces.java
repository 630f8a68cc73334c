package dev.idempotency.spring.messaging;

import java.util.ArrayList;
import java.util.BitSet;
import java.util.List;
import java.util.function.ToIntFunction;
import org.jspecify.annotations.Nullable;

/**
 * Which messages of a batch listener's list each record produced in its container's Kafka
 * transaction may belong to ({@link KafkaTransactionSends} counts the records). The starter hands a
 * batch's messages to the listener one by one as it reads them ({@link HandedOutList}), in order,
 * each key's lease checked just before that message's send; a record is produced after the listener
 * read its message. So a record counts for every message the listener first read since the records
 * before it (or since its call began): any of them may be its message. A record produced before the
 * listener read another message for the first time counts for the same messages as the records
 * before it. A listener that sends each message after reading it and before reading the next has
 * each record counted for its own message only; one that reads ahead of its send (message {@code i
 * + 1} before message {@code i}'s record), or reads a few messages and produces one record for them
 * all, has the record counted for each of them.
 *
 * <p>So every message the listener read before a record produced in the transaction is counted by
 * that record, or by an earlier one: a message with no record counted for it had none produced
 * after the listener first read it. After a Kafka batch's stop whose transaction did not commit
 * ({@link ContainerTransactionManager}), the messages before the stop with records counted for them
 * are released (the abort discarded their records; a provider call among them is made again at
 * their redelivery, a second send), the others recorded (their sends, a provider call, happened).
 * Where that attribution is not known ({@link #attributable}), the whole batch is released, as any
 * record produced in the transaction had it before:
 *
 * <ul>
 *   <li>a record produced before the listener read any message (outside any message's send);
 *   <li>a listener that read every message of its list (of two or more) before its first record: a
 *       copy of the list, or one record for the whole batch; each message may have been sent in it;
 *   <li>a record counted for a message that is not counted as sent (the failed message, or one
 *       after it): the listener read ahead of what it sent.
 * </ul>
 *
 * Counted on the consumer's thread and on any the listener reads from; synchronized.
 */
final class TransactionProduces {

  private final KafkaTransactionSends.Sends sends;
  private final long[] produced;

  /** The messages the listener has read at least once. */
  private final BitSet read = new BitSet();

  /** The messages first read since the records last counted: the next records count for them. */
  private BitSet sinceLastRecords = new BitSet();

  /** The messages the records last counted were counted for. */
  private BitSet lastRecordsFor = new BitSet();

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

  /**
   * The listener read message {@code index}: what was produced since the last read counts first
   * (for the messages read before it), then a first read of it is noted.
   */
  synchronized void read(int index) {
    if (ended) {
      return;
    }
    attribute();
    if (!read.get(index)) {
      read.set(index);
      sinceLastRecords.set(index);
    }
    furthest = Math.max(furthest, index);
  }

  /** The listener's call ended: what was produced since the last read counts as above. */
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
    if (!sinceLastRecords.isEmpty()) {
      lastRecordsFor = sinceLastRecords;
      sinceLastRecords = new BitSet();
    }
    for (int i = lastRecordsFor.nextSetBit(0); i >= 0; i = lastRecordsFor.nextSetBit(i + 1)) {
      produced[i] += added;
    }
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
  private boolean attributable(BitSet sent) {
    if (beforeAnyRead > 0) {
      return false;
    }
    if (produced.length > 1 && furthestAtFirstRecord == produced.length - 1) {
      return false;
    }
    for (int i = 0; i < produced.length; i++) {
      if (produced[i] > 0 && !sent.get(i)) {
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
    BitSet counted = new BitSet(produced.length);
    for (T item : sent) {
      counted.set(indexOf.applyAsInt(item));
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
