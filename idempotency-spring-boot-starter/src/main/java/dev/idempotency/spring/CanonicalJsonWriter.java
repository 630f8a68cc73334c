package dev.idempotency.spring;

import dev.idempotency.RequestFingerprints;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Objects;

/**
 * The canonical form of {@link JsonFingerprints}, written from a parser's events instead of a tree,
 * and its SHA-256: the same bytes {@link RequestFingerprints#canonicalJson} gives for the tree of
 * the same document, so that fingerprints stored before keep matching. Only objects are held:
 *
 * <ol>
 *   <li>each member is written where it arrives, {@code "name":value}, its start remembered;
 *   <li>an object whose names arrived in order and once each (the canonical order) is complete as
 *       written; any other is rewritten at its end, its members sorted by name (UTF-16 code units,
 *       {@link String#compareTo}), the last of equal names kept (as Jackson's {@code Map} keeps
 *       it);
 *   <li>whatever lies outside every object goes to the digest at once.
 * </ol>
 *
 * <p>Strings are encoded as {@link String#getBytes} with UTF-8 encodes them (a lone surrogate
 * becomes {@code ?}), numbers by {@link RequestFingerprints#canonicalJson}. One use, one thread.
 */
final class CanonicalJsonWriter {

  private static final HexFormat HEX = HexFormat.of();
  private static final byte[] HEX_DIGITS = "0123456789abcdef".getBytes(StandardCharsets.US_ASCII);
  private static final byte[] TRUE = {'t', 'r', 'u', 'e'};
  private static final byte[] FALSE = {'f', 'a', 'l', 's', 'e'};
  private static final byte[] NULL = {'n', 'u', 'l', 'l'};

  /** Digest instances are costly to look up: one per thread. */
  private static final ThreadLocal<MessageDigest> SHA_256 =
      ThreadLocal.withInitial(
          () -> {
            try {
              return MessageDigest.getInstance("SHA-256");
            } catch (NoSuchAlgorithmException e) {
              throw new IllegalStateException("SHA-256 is required of every Java platform", e);
            }
          });

  private final MessageDigest digest = SHA_256.get();
  private byte[] out;
  private int length;

  /** The order of an object's members and its bytes while it is rewritten, reused. */
  private int[] order = new int[16];

  private byte[] scratch = new byte[256];

  /** The open containers, innermost last. */
  private Container[] open = new Container[8];

  private int depth;

  /** How many of the open containers are objects: while any is, the bytes are held. */
  private int openObjects;

  /**
   * Documents on which a mapper's streamed fingerprint must equal its tree's before it is used:
   * what the application's mapper could be configured to read otherwise (default typing, a root
   * wrapper, Java arrays, a deserializer of its own for strings, numbers, maps or lists) shows
   * here, and the tree is then used, as before.
   */
  private static final List<String> PROBES =
      List.of(
          "{\"b\":[1,2.50,-0,1E2,12345678901234567890123,-0.0,1.5e300,\" x \",true,false,null,"
              + "{},[]],\"a\":{\"z\":\"\u00e9\\u0000\\ud83d\\ude00\\ud800\",\"y\":[{\"k\":1,"
              + "\"j\":{\"m\":\"M\"}}]},\"a \":0.1,\"\u00e9\":\"\\n\",\"A\":-7}",
          "{\"k\":1,\"j\":2,\"k\":{\"b\":3}}", // apart: a mapper may refuse duplicate names
          "[]",
          "[\"x\",[1,{\"b\":1,\"a\":2}]]",
          "\" s \"",
          "1.0",
          "-12",
          "true",
          "null",
          "{}");

  /** A fingerprint of a document, computed one way or the other. */
  interface Fingerprinter {
    String of(byte[] json) throws Exception;
  }

  /**
   * Whether two ways of fingerprinting agree on every probe document (both give the same value, or
   * both fail).
   */
  static boolean agree(Fingerprinter tree, Fingerprinter streamed) {
    for (String probe : PROBES) {
      byte[] json = probe.getBytes(StandardCharsets.UTF_8);
      if (!Objects.equals(outcome(tree, json), outcome(streamed, json))) {
        return false;
      }
    }
    return true;
  }

  private static String outcome(Fingerprinter fingerprinter, byte[] json) {
    try {
      return fingerprinter.of(json);
    } catch (Exception e) {
      return "failed";
    }
  }

  CanonicalJsonWriter(int sizeHint) {
    out = new byte[Math.max(64, Math.min(sizeHint, 1 << 20))];
    digest.reset();
  }

  /** The open containers' depth: 0 before the first value and after the last. */
  int depth() {
    return depth;
  }

  void startObject() {
    beforeValue();
    Container object = push(true);
    object.start = length;
    object.inOrder = true;
    object.lastName = null;
    openObjects++;
    write((byte) '{');
  }

  void name(String name) {
    Container object = open[depth - 1];
    if (object.members > 0) {
      write((byte) ',');
      if (object.inOrder && object.lastName.compareTo(name) >= 0) {
        object.inOrder = false;
      }
    }
    object.member(name, length);
    object.lastName = name;
    writeString(name);
    write((byte) ':');
  }

  void endObject() {
    Container object = open[--depth];
    if (!object.inOrder) {
      sortMembers(object);
    }
    write((byte) '}');
    openObjects--;
    flushIfFree();
  }

  void startArray() {
    beforeValue();
    push(false);
    write((byte) '[');
  }

  void endArray() {
    depth--;
    write((byte) ']');
    flushIfFree();
  }

  void string(String text) {
    beforeValue();
    writeString(text);
    flushIfFree();
  }

  void string(char[] chars, int offset, int count) {
    beforeValue();
    writeString(chars, offset, count);
    flushIfFree();
  }

  void number(long value) {
    beforeValue();
    writeLong(value); // every long has at most 19 digits: plain, as RFC 8785's
    flushIfFree();
  }

  void number(BigInteger value) {
    beforeValue();
    writeAscii(RequestFingerprints.canonicalJson(value));
    flushIfFree();
  }

  void number(BigDecimal value) {
    beforeValue();
    writeAscii(RequestFingerprints.canonicalJson(value));
    flushIfFree();
  }

  void bool(boolean value) {
    beforeValue();
    write(value ? TRUE : FALSE);
    flushIfFree();
  }

  void nullValue() {
    beforeValue();
    write(NULL);
    flushIfFree();
  }

  /** The SHA-256 of the canonical form, in hex; after the last value. */
  String fingerprint() {
    if (depth != 0) {
      throw new IllegalStateException("the JSON value is not complete");
    }
    flushIfFree();
    return HEX.formatHex(digest.digest());
  }

  private void beforeValue() {
    if (depth > 0) {
      Container container = open[depth - 1];
      if (!container.object) {
        if (container.members > 0) {
          write((byte) ',');
        }
        container.members++;
      }
    }
  }

  private Container push(boolean object) {
    if (depth == open.length) {
      open = Arrays.copyOf(open, depth * 2);
    }
    Container container = open[depth];
    if (container == null) {
      container = new Container();
      open[depth] = container;
    }
    depth++;
    container.object = object;
    container.members = 0;
    return container;
  }

  private void flushIfFree() {
    if (openObjects == 0 && length > 0) {
      digest.update(out, 0, length);
      length = 0;
    }
  }

  /**
   * Rewrites an object's members in name order, the last of equal names kept: each member's bytes
   * run from its start to the comma before the next one's, the last one's to the end.
   */
  private void sortMembers(Container object) {
    int count = object.members;
    String[] names = object.names;
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
    int from = object.start + 1; // after '{'
    int size = length - from;
    if (scratch.length < size) {
      scratch = new byte[Math.max(size, scratch.length * 2)];
    }
    byte[] members = scratch;
    System.arraycopy(out, from, members, 0, size);
    int[] starts = object.starts;
    length = from;
    boolean first = true;
    for (int i = 0; i < count; i++) {
      int member = order[i];
      if (i + 1 < count && names[order[i + 1]].equals(names[member])) {
        continue; // a later member of this name follows: it is the one kept
      }
      int start = starts[member] - from;
      int end = member + 1 < count ? starts[member + 1] - from - 1 : size;
      if (!first) {
        write((byte) ',');
      }
      first = false;
      ensure(end - start);
      System.arraycopy(members, start, out, length, end - start);
      length += end - start;
    }
  }

  private void writeString(String text) {
    write((byte) '"');
    for (int i = 0; i < text.length(); i++) {
      i = writeChar(text.charAt(i), text, null, i, text.length());
    }
    write((byte) '"');
  }

  private void writeString(char[] chars, int offset, int count) {
    write((byte) '"');
    int end = offset + count;
    for (int i = offset; i < end; i++) {
      i = writeChar(chars[i], null, chars, i, end);
    }
    write((byte) '"');
  }

  /**
   * Writes one character of a string, escaped as {@link RequestFingerprints#canonicalJson} escapes
   * it and encoded as {@link String#getBytes} encodes it; returns the index of the last character
   * used (the next one too for a surrogate pair).
   */
  private int writeChar(char c, String text, char[] chars, int i, int end) {
    ensure(6);
    if (c >= 0x20 && c < 0x80) {
      if (c == '"' || c == '\\') {
        out[length++] = '\\';
      }
      out[length++] = (byte) c;
    } else if (c < 0x20) {
      out[length++] = '\\';
      switch (c) {
        case '\b' -> out[length++] = 'b';
        case '\f' -> out[length++] = 'f';
        case '\n' -> out[length++] = 'n';
        case '\r' -> out[length++] = 'r';
        case '\t' -> out[length++] = 't';
        default -> {
          out[length++] = 'u';
          out[length++] = '0';
          out[length++] = '0';
          out[length++] = HEX_DIGITS[c >> 4];
          out[length++] = HEX_DIGITS[c & 0xf];
        }
      }
    } else if (c < 0x800) {
      out[length++] = (byte) (0xc0 | (c >> 6));
      out[length++] = (byte) (0x80 | (c & 0x3f));
    } else if (!Character.isSurrogate(c)) {
      out[length++] = (byte) (0xe0 | (c >> 12));
      out[length++] = (byte) (0x80 | ((c >> 6) & 0x3f));
      out[length++] = (byte) (0x80 | (c & 0x3f));
    } else {
      char next = i + 1 < end ? (text != null ? text.charAt(i + 1) : chars[i + 1]) : 0;
      if (Character.isHighSurrogate(c) && Character.isLowSurrogate(next)) {
        int code = Character.toCodePoint(c, next);
        out[length++] = (byte) (0xf0 | (code >> 18));
        out[length++] = (byte) (0x80 | ((code >> 12) & 0x3f));
        out[length++] = (byte) (0x80 | ((code >> 6) & 0x3f));
        out[length++] = (byte) (0x80 | (code & 0x3f));
        return i + 1;
      }
      out[length++] = '?'; // a lone surrogate, as String.getBytes replaces it
    }
    return i;
  }

  private void writeLong(long value) {
    if (value == Long.MIN_VALUE) {
      writeAscii(Long.toString(value));
      return;
    }
    ensure(20);
    if (value < 0) {
      out[length++] = '-';
      value = -value;
    }
    int digits = 1;
    for (long rest = value / 10; rest > 0; rest /= 10) {
      digits++;
    }
    for (int i = length + digits - 1; i >= length; i--) {
      out[i] = (byte) ('0' + value % 10);
      value /= 10;
    }
    length += digits;
  }

  private void writeAscii(String text) {
    ensure(text.length());
    for (int i = 0; i < text.length(); i++) {
      out[length++] = (byte) text.charAt(i);
    }
  }

  private void write(byte b) {
    ensure(1);
    out[length++] = b;
  }

  private void write(byte[] bytes) {
    ensure(bytes.length);
    System.arraycopy(bytes, 0, out, length, bytes.length);
    length += bytes.length;
  }

  private void ensure(int more) {
    if (length + more > out.length) {
      out = Arrays.copyOf(out, Math.max(out.length * 2, length + more));
    }
  }

  /** An open object or array. */
  private static final class Container {
    boolean object;

    /** The members (or elements) so far. */
    int members;

    /** An object's offset of its '{'. */
    int start;

    /** Whether an object's names arrived in strictly ascending order so far. */
    boolean inOrder;

    String lastName;

    /** An object's member names and the offsets where each member starts (at its name). */
    String[] names = new String[8];

    int[] starts = new int[8];

    void member(String name, int offset) {
      if (members == names.length) {
        names = Arrays.copyOf(names, members * 2);
        starts = Arrays.copyOf(starts, members * 2);
      }
      names[members] = name;
      starts[members] = offset;
      members++;
    }
  }
}
