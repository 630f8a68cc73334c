package dev.idempotency.spring;

import dev.idempotency.RequestFingerprints;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;
import java.util.HexFormat;

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
 * becomes {@code ?}), numbers by {@link RequestFingerprints#canonicalJson} ({@link
 * CanonicalNumbers}); an object's members are sorted by {@link MemberSort}. Whether a mapper may
 * fingerprint with this writer is {@link StreamedFingerprintCheck}'s question. One use, one thread.
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

  /** Rewrites the objects whose members did not arrive in order. */
  private final MemberSort memberSort = new MemberSort();

  /** The open containers, innermost last. */
  private Container[] open = new Container[8];

  private int depth;

  /** How many of the open containers are objects: while any is, the bytes are held. */
  private int openObjects;

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
      length =
          memberSort.rewrite(
              out, object.start + 1, length, object.names, object.starts, object.members);
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
    ensure(CanonicalNumbers.MAX_LONG_LENGTH);
    length = CanonicalNumbers.writeLong(out, length, value);
    flushIfFree();
  }

  void number(BigInteger value) {
    beforeValue();
    writeAscii(CanonicalNumbers.of(value));
    flushIfFree();
  }

  void number(BigDecimal value) {
    beforeValue();
    writeAscii(CanonicalNumbers.of(value));
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
