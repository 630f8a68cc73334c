package dev.idempotency.spring.suite;

import java.util.ArrayList;
import java.util.List;

/**
 * The failures of a Kafka listener container's consumer outside any listener call, as its
 * application's error handler saw them ({@code handleOtherException}: a poll or a commit that
 * threw). The first few are kept, and how many there were.
 */
public final class ConsumerFailures {

  private static final int KEPT = 5;

  private final List<String> first = new ArrayList<>();
  private int count;

  /** Notes one failure. */
  public synchronized void add(String failure) {
    count++;
    if (first.size() < KEPT) {
      first.add(failure);
    }
  }

  /** What was noted: empty if nothing failed, else the count and the first few. */
  public synchronized List<String> seen() {
    if (count == 0) {
      return List.of();
    }
    List<String> seen = new ArrayList<>();
    seen.add(count + " consumer failure(s), the first:");
    seen.addAll(first);
    return seen;
  }
}
