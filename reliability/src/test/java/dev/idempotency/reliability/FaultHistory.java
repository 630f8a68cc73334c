package dev.idempotency.reliability;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

/**
 * The history of a fault run, as its processes wrote it: every send the fake provider accepted
 * (synced to disk before the sender returned), every call's outcome as the caller saw it, and every
 * fault injected. Lines are {@code |}-separated; keys, results and provider keys never contain one.
 */
final class FaultHistory {

  /**
   * A send the provider accepted: when the sender started ({@code startMillis}) and when the
   * provider logged it ({@code millis}, at the sender's end).
   */
  record Send(
      String key,
      String providerKey,
      int attempt,
      int process,
      long startMillis,
      long millis,
      String result) {
    String line() {
      return String.join(
          "|",
          key,
          providerKey,
          Integer.toString(attempt),
          Integer.toString(process),
          Long.toString(startMillis),
          Long.toString(millis),
          result);
    }

    static Send parse(String line) {
      String[] f = line.split("\\|", -1);
      return new Send(
          f[0],
          f[1],
          Integer.parseInt(f[2]),
          Integer.parseInt(f[3]),
          Long.parseLong(f[4]),
          Long.parseLong(f[5]),
          f[6]);
    }
  }

  /**
   * What one call returned, and when: {@code SENT} or {@code REPLAYED} with a value, or the
   * failure's name.
   */
  record Call(
      String key,
      String kind,
      int process,
      String outcome,
      String value,
      boolean recorded,
      long millis) {
    String line() {
      return String.join(
          "|",
          key,
          kind,
          Integer.toString(process),
          outcome,
          value == null ? "" : value,
          Boolean.toString(recorded),
          Long.toString(millis));
    }

    static Call parse(String line) {
      String[] f = line.split("\\|", -1);
      return new Call(
          f[0],
          f[1],
          Integer.parseInt(f[2]),
          f[3],
          f[4].isEmpty() ? null : f[4],
          Boolean.parseBoolean(f[5]),
          Long.parseLong(f[6]));
    }
  }

  /**
   * A fault: {@code KILL}, {@code PAUSE} (of {@code process}, from {@code millis} to {@code
   * untilMillis}), {@code STORE_RESTART}, {@code DELAY}, {@code PARTITION} or {@code CLOCK_JUMP}.
   */
  record Fault(String type, int process, long millis, long untilMillis) {
    String line() {
      return String.join(
          "|", type, Integer.toString(process), Long.toString(millis), Long.toString(untilMillis));
    }

    static Fault parse(String line) {
      String[] f = line.split("\\|", -1);
      return new Fault(f[0], Integer.parseInt(f[1]), Long.parseLong(f[2]), Long.parseLong(f[3]));
    }
  }

  /**
   * A store call of a client that holds or writes a claim ({@code claim}, {@code takeover}: a claim
   * granted as a takeover, {@code extend}, {@code complete}) for the key id {@code keyId} (the
   * key's digest, {@link dev.idempotency.IdempotencyKey#digest}) and the claim of attempt {@code
   * attempt}, from {@code millis} to {@code untilMillis}, when the claim's lease as that client
   * last asked for it ended at {@code leaseUntilMillis} ({@code attempt} and {@code
   * leaseUntilMillis} 0 if the claim is not known); logged when it took a quarter lease or more,
   * failed, or ended after that lease, and every takeover ({@link StoreCallLog}). Its answer:
   * {@code failed} (it threw), else {@code granted} (a claim or takeover won, a renewal or outcome
   * write the store accepted) or not (refused); and {@code leaseAfterMillis}, the claim's lease end
   * as it stood when the call returned: a granted renewal's, counted from the renewal's start as
   * the guard counts it, else {@code leaseUntilMillis}.
   */
  record StoreCall(
      String operation,
      int process,
      String keyId,
      int attempt,
      long millis,
      long untilMillis,
      long leaseUntilMillis,
      boolean failed,
      boolean granted,
      long leaseAfterMillis) {

    /**
     * A line of a call that did not renew the claim's lease (a refused or failed renewal or outcome
     * write), as hand-written histories give it: the lease stands as it was.
     */
    StoreCall(
        String operation,
        int process,
        String keyId,
        int attempt,
        long millis,
        long untilMillis,
        long leaseUntilMillis,
        boolean failed) {
      this(
          operation,
          process,
          keyId,
          attempt,
          millis,
          untilMillis,
          leaseUntilMillis,
          failed,
          false,
          leaseUntilMillis);
    }

    String line() {
      return String.join(
          "|",
          operation,
          Integer.toString(process),
          keyId,
          Integer.toString(attempt),
          Long.toString(millis),
          Long.toString(untilMillis),
          Long.toString(leaseUntilMillis),
          Boolean.toString(failed),
          Boolean.toString(granted),
          Long.toString(leaseAfterMillis));
    }

    static StoreCall parse(String line) {
      String[] f = line.split("\\|", -1);
      return new StoreCall(
          f[0],
          Integer.parseInt(f[1]),
          f[2],
          Integer.parseInt(f[3]),
          Long.parseLong(f[4]),
          Long.parseLong(f[5]),
          Long.parseLong(f[6]),
          Boolean.parseBoolean(f[7]),
          Boolean.parseBoolean(f[8]),
          Long.parseLong(f[9]));
    }

    /**
     * Whether the claim's lease, as the client knew it when this call began, ran out while the call
     * was on its way (unanswered). A renewal the store granted may have kept it: see {@link
     * #lostTheLease}.
     */
    boolean leaseRanOutUnanswered() {
      return leaseUntilMillis > millis && leaseUntilMillis <= untilMillis;
    }

    /**
     * Whether the claim's lease ran out while this call was on its way and the call did not keep
     * it: the lease as it stood when the call returned (a granted renewal's, from the renewal's
     * start; a refused or failed call's, the one before it) ended after the call was asked and
     * before its answer came.
     */
    boolean lostTheLease() {
      return leaseAfterMillis > millis && leaseAfterMillis <= untilMillis;
    }
  }

  final List<Send> sends = new ArrayList<>();
  final List<Call> calls = new ArrayList<>();
  final List<Fault> faults = new ArrayList<>();
  final List<StoreCall> storeCalls = new ArrayList<>();

  /**
   * When the nemesis started and stopped (wall-clock ms, from {@code window.txt}); 0 and 0 for a
   * run from before the window was written.
   */
  long activeFromMillis;

  long activeUntilMillis;

  /** The clients' lease in ms, from the third line of {@code window.txt} (800 if absent). */
  long leaseMillis = 800;

  /**
   * The file that holds when the nemesis started and stopped (two lines of wall-clock ms), then the
   * clients' lease in ms.
   */
  static final String WINDOW_FILE = "window.txt";

  /**
   * Reads {@code sends-*.log}, {@code calls-*.log}, {@code faults*.log}, {@code store-*.log} and
   * {@code window.txt} from a directory.
   */
  static FaultHistory read(Path dir) throws IOException {
    FaultHistory history = new FaultHistory();
    try (Stream<Path> files = Files.list(dir)) {
      for (Path file : files.sorted().toList()) {
        String name = file.getFileName().toString();
        for (String line : completeLines(file)) {
          if (name.startsWith("sends-")) {
            history.sends.add(Send.parse(line));
          } else if (name.startsWith("calls-")) {
            history.calls.add(Call.parse(line));
          } else if (name.startsWith("faults")) {
            history.faults.add(Fault.parse(line));
          } else if (name.startsWith("store-")) {
            history.storeCalls.add(StoreCall.parse(line));
          }
        }
        if (name.equals(WINDOW_FILE)) {
          List<String> window = Files.readAllLines(file);
          history.activeFromMillis = Long.parseLong(window.get(0).trim());
          history.activeUntilMillis = Long.parseLong(window.get(1).trim());
          if (window.size() > 2 && !window.get(2).isBlank()) {
            history.leaseMillis = Long.parseLong(window.get(2).trim());
          }
        }
      }
    }
    return history;
  }

  /**
   * The lines of a file that end in a newline: a killed process may leave a last one unfinished.
   */
  private static List<String> completeLines(Path file) throws IOException {
    String text = Files.readString(file);
    List<String> lines = new ArrayList<>(List.of(text.split("\n", -1)));
    lines.remove(lines.size() - 1); // after the last newline: empty, or unfinished
    lines.removeIf(String::isBlank);
    return lines;
  }
}
