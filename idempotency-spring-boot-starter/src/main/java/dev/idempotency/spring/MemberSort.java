package dev.idempotency.spring;

import java.util.Arrays;

/**
 * The member sort of {@link CanonicalJsonWriter}: rewrites an object's members, as written, in name
 * order (UTF-16 code units, {@link String#compareTo}), the last of equal names kept (as Jackson's
 * {@code Map} keeps it). Its buffers are reused from one object to the next. One writer, one
 * thread.
 */
final class MemberSort {

  /** The order of an object's members and its bytes while it is rewritten, reused. */
  private int[] order = new int[16];

  private byte[] scratch = new byte[256];

  /**
   * Rewrites in place the members of an object that run in {@code out} from {@code from} (after its
   * '{') to {@code length}, in name order, the last of equal names kept: each member's bytes run
   * from its start to the comma before the next one's, the last one's to the end. The rewritten
   * members are never longer than the written ones.
   *
   * @param names the members' names, in the order written
   * @param starts the offsets in {@code out} where each member starts (at its name)
   * @param count how many members were written
   * @return the end of the rewritten members in {@code out}
   */
  int rewrite(byte[] out, int from, int length, String[] names, int[] starts, int count) {
    int[] order = sort(names, count);
    int size = length - from;
    if (scratch.length < size) {
      scratch = new byte[Math.max(size, scratch.length * 2)];
    }
    byte[] members = scratch;
    System.arraycopy(out, from, members, 0, size);
    int end = from;
    boolean first = true;
    for (int i = 0; i < count; i++) {
      int member = order[i];
      if (i + 1 < count && names[order[i + 1]].equals(names[member])) {
        continue; // a later member of this name follows: it is the one kept
      }
      int start = starts[member] - from;
      int stop = member + 1 < count ? starts[member + 1] - from - 1 : size;
      if (!first) {
        out[end++] = ',';
      }
      first = false;
      System.arraycopy(members, start, out, end, stop - start);
      end += stop - start;
    }
    return end;
  }

  /** The members' indexes in name order, equal names in the order written (a stable sort). */
  private int[] sort(String[] names, int count) {
    if (order.length < count) {
      order = new int[Math.max(count, order.length * 2)];
    }
    int[] order = this.order;
    for (int i = 0; i < count; i++) {
      order[i] = i;
    }
    if (count <= 32) { // an insertion sort: stable, and no boxing for the usual few members
      for (int i = 1; i < count; i++) {
        int member = order[i];
        int j = i;
        for (; j > 0 && names[order[j - 1]].compareTo(names[member]) > 0; j--) {
          order[j] = order[j - 1];
        }
        order[j] = member;
      }
    } else {
      Integer[] boxed = new Integer[count];
      for (int i = 0; i < count; i++) {
        boxed[i] = i;
      }
      Arrays.sort(boxed, (a, b) -> names[a].compareTo(names[b])); // stable: equal names in order
      for (int i = 0; i < count; i++) {
        order[i] = boxed[i];
      }
    }
    return order;
  }
}
