package dev.idempotency.redis;

import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spi.StoredRecord;
import java.nio.charset.StandardCharsets;
import java.util.List;

/** Reads the replies of the store's commands and scripts into SPI values. */
final class Replies {

  /** A claim script's answer for a key whose value it cannot read (see {@code perKey}). */
  private static final long UNREADABLE = -1;

  private Replies() {}

  private static dev.idempotency.UnreadableRecordException unreadableByScript() {
    return RecordValue.unreadable(
        "a value of another Redis type, or a record it cannot parse,", null);
  }

  /**
   * What {@code SET NX GET} returned: nothing, so the key is claimed; a completed or failed record,
   * so it exists; or a record in progress, for which this returns {@code null}: whether its lease
   * has expired is for the claim script to decide on the server's clock.
   */
  static ClaimResult settledOrClaimed(byte[] previous) {
    if (previous == null) {
      return new ClaimResult.Claimed(1, false);
    }
    RecordValue record = RecordValue.parse(previous);
    return record.state() == RecordState.IN_PROGRESS
        ? null
        : new ClaimResult.Existing(record.settled(), false);
  }

  /**
   * The claim script's reply: {@code {1, attempt}} when claimed, {@code {0, 0, record}} for a
   * settled record, {@code {0, leaseExpired, record, now, pttl}} for one in progress (see {@code
   * claim} in {@code record-functions.lua}), {@code {-1}} for a value the script cannot read.
   *
   * @throws dev.idempotency.UnreadableRecordException for a value the store cannot read
   */
  static ClaimResult claimResult(List<Object> reply) {
    long claimed = number(reply.get(0));
    if (claimed == UNREADABLE) {
      throw unreadableByScript();
    }
    if (claimed == 1) {
      int attempt = (int) number(reply.get(1));
      return new ClaimResult.Claimed(attempt, attempt > 1);
    }
    boolean leaseExpired = number(reply.get(1)) == 1;
    RecordValue record = RecordValue.parse((byte[]) reply.get(2));
    StoredRecord stored =
        reply.size() > 3
            ? record.inProgress(number(reply.get(3)), number(reply.get(4)))
            : record.settled();
    return new ClaimResult.Existing(stored, leaseExpired);
  }

  /**
   * One key's reply in the claim-batch script's: {@code 1} for a new key it claimed, {@code -1} for
   * a value it cannot read, otherwise the claim script's reply (see {@link #claimResult}).
   *
   * @throws dev.idempotency.UnreadableRecordException for a value the store cannot read
   */
  @SuppressWarnings("unchecked")
  static ClaimResult batchClaimResult(Object reply) {
    if (reply instanceof List<?> list) {
      return claimResult((List<Object>) list);
    }
    long claimed = number(reply);
    if (claimed == UNREADABLE) {
      throw unreadableByScript();
    }
    if (claimed != 1) {
      throw new IllegalStateException("unexpected claim reply " + reply);
    }
    return new ClaimResult.Claimed(1, false);
  }

  /**
   * The inspect script's reply: {@code {}} for no record, {@code {0, record}} for a settled one,
   * {@code {1, record, now, pttl}} for one in progress.
   */
  static java.util.Optional<StoredRecord> inspected(List<Object> reply) {
    if (reply.isEmpty()) {
      return java.util.Optional.empty();
    }
    RecordValue record = RecordValue.parse((byte[]) reply.get(1));
    return java.util.Optional.of(
        number(reply.get(0)) == 1
            ? record.inProgress(number(reply.get(2)), number(reply.get(3)))
            : record.settled());
  }

  /** A script's {@code {1}} or {@code {0}}, or one element of a batch script's reply. */
  static boolean flag(Object reply) {
    Object value = reply instanceof List<?> list ? list.get(0) : reply;
    return number(value) == 1;
  }

  static long number(Object value) {
    if (value instanceof Long number) {
      return number;
    }
    return Long.parseLong(value == null ? "" : new String((byte[]) value, StandardCharsets.UTF_8));
  }

  static byte[] bytes(String text) {
    return text.getBytes(StandardCharsets.UTF_8);
  }
}
