package dev.idempotency.spring.web;

import dev.idempotency.ResultCodec;
import jakarta.servlet.http.HttpServletResponse;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * The response a client saw, as stored for replays: status, the headers that matter ({@code
 * Content-Type}, {@code Location}, those the endpoint lists) and the body's bytes; or, for a body
 * larger than the capture bound, the status and headers alone ({@link #bodyStored()} false).
 * Encoded in a small versioned binary form of its own, never with Java serialization.
 *
 * @param status the status code
 * @param headers the headers, in order
 * @param body the body, or {@code null} if it was too large to store
 */
record StoredResponse(int status, List<Map.Entry<String, String>> headers, byte @Nullable [] body) {

  /** Version 1: status, headers, body. */
  private static final byte FORMAT_1 = 1;

  /** Version 2: status, headers, whether the body is stored, the body. */
  private static final byte FORMAT_2 = 2;

  /** What a handler answered, read off the wrapper before anything reaches the client. */
  static StoredResponse capture(
      HttpServletResponse response, byte @Nullable [] body, List<String> listedHeaders) {
    List<Map.Entry<String, String>> headers = new ArrayList<>();
    if (response.getContentType() != null) {
      headers.add(Map.entry("Content-Type", response.getContentType()));
    }
    List<String> names = new ArrayList<>();
    names.add("Location");
    names.addAll(listedHeaders);
    for (String name : names) {
      for (String value : response.getHeaders(name)) {
        headers.add(Map.entry(name, value));
      }
    }
    return new StoredResponse(response.getStatus(), List.copyOf(headers), body);
  }

  /**
   * The status and headers with an empty body and no {@code Content-Type}: what is known of a
   * response whose body the container wrote itself.
   */
  StoredResponse withoutBody() {
    List<Map.Entry<String, String>> kept = new ArrayList<>();
    for (Map.Entry<String, String> header : headers) {
      if (!header.getKey().equals("Content-Type")) {
        kept.add(header);
      }
    }
    return new StoredResponse(status, List.copyOf(kept), new byte[0]);
  }

  /** Whether the body was stored, so that a repeat can be answered with it. */
  boolean bodyStored() {
    return body != null;
  }

  /** Writes it to a response that has nothing written yet; the body must be stored. */
  void replayTo(HttpServletResponse response, String replayedHeader) throws IOException {
    byte[] bytes = body != null ? body : new byte[0];
    response.setStatus(status);
    for (Map.Entry<String, String> header : headers) {
      if (header.getKey().equals("Content-Type")) {
        response.setContentType(header.getValue());
      } else {
        response.addHeader(header.getKey(), header.getValue());
      }
    }
    response.setHeader(replayedHeader, "true");
    response.setContentLength(bytes.length);
    response.getOutputStream().write(bytes);
  }

  /**
   * The codec the filter stores responses with. The format is {@link java.io.DataOutputStream}'s:
   * the version byte, status and header count as unsigned shorts, each header's name and value as
   * {@code writeUTF} writes them (a length, then modified UTF-8), whether the body is stored, its
   * length as an int, the body. Headers in plain ASCII (nearly all) are written and read straight
   * to and from one array, which is that format byte for byte; anything else goes through the
   * streams, as every response did before (issue 39: the streams' buffers and copies were most of a
   * replay's decoding).
   */
  static final ResultCodec<StoredResponse> CODEC =
      new ResultCodec<>() {
        @Override
        public byte[] encode(StoredResponse response) throws IOException {
          byte[] body = response.body != null ? response.body : new byte[0];
          int length = 1 + 2 + 2 + 1 + 4 + body.length;
          for (Map.Entry<String, String> header : response.headers) {
            if (!isShortAscii(header.getKey()) || !isShortAscii(header.getValue())) {
              return encodeWithStreams(response, body);
            }
            length += 2 + header.getKey().length() + 2 + header.getValue().length();
          }
          ByteBuffer out = ByteBuffer.allocate(length);
          out.put(FORMAT_2);
          out.putShort((short) response.status);
          out.putShort((short) response.headers.size());
          for (Map.Entry<String, String> header : response.headers) {
            putAscii(out, header.getKey());
            putAscii(out, header.getValue());
          }
          out.put((byte) (response.body != null ? 1 : 0));
          out.putInt(body.length);
          out.put(body);
          return out.array();
        }

        @Override
        public StoredResponse decode(byte[] bytes) throws IOException {
          try {
            ByteBuffer in = ByteBuffer.wrap(bytes);
            byte format = in.get();
            if (format != FORMAT_1 && format != FORMAT_2) {
              throw new IOException("not a stored response of a known version (" + format + ")");
            }
            int status = Short.toUnsignedInt(in.getShort());
            int count = Short.toUnsignedInt(in.getShort());
            @SuppressWarnings({"unchecked", "rawtypes"})
            Map.Entry<String, String>[] headers = new Map.Entry[count];
            for (int i = 0; i < count; i++) {
              String name = getAscii(in);
              String value = name != null ? getAscii(in) : null;
              if (value == null) {
                return decodeWithStreams(bytes); // not plain ASCII: modified UTF-8 in full
              }
              headers[i] = Map.entry(name, value);
            }
            boolean stored = format == FORMAT_1 || in.get() != 0;
            byte[] body = new byte[in.getInt()];
            in.get(body);
            return new StoredResponse(status, List.of(headers), stored ? body : null);
          } catch (BufferUnderflowException cutShort) {
            throw new EOFException("a stored response cut short");
          }
        }
      };

  /** Whether {@code writeUTF} writes {@code text} as its own characters: 1 to 0x7f, 64K at most. */
  private static boolean isShortAscii(String text) {
    if (text.length() > 0xffff) {
      return false;
    }
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      if (c == 0 || c > 0x7f) {
        return false;
      }
    }
    return true;
  }

  private static void putAscii(ByteBuffer out, String text) {
    out.putShort((short) text.length());
    for (int i = 0; i < text.length(); i++) {
      out.put((byte) text.charAt(i));
    }
  }

  /**
   * A {@code writeUTF} string that is plain ASCII, or {@code null} (the position then undefined) if
   * it is not.
   */
  private static @Nullable String getAscii(ByteBuffer in) {
    int length = Short.toUnsignedInt(in.getShort());
    int at = in.position();
    if (length > in.remaining()) {
      throw new BufferUnderflowException();
    }
    byte[] array = in.array();
    for (int i = at; i < at + length; i++) {
      if (array[i] <= 0) { // 0x80 and above are negative: a multi-byte sequence
        return null;
      }
    }
    in.position(at + length);
    for (String common : COMMON_TEXTS) {
      if (common.length() == length && sameAscii(array, at, common)) {
        return common;
      }
    }
    return new String(array, at, length, StandardCharsets.ISO_8859_1);
  }

  /**
   * Header names and values most stored responses hold (a JSON answer's, on Spring MVC and on
   * WebFlux, whose encoder adds the charset): a replay reads them as these strings instead of
   * making new ones (issue 39).
   */
  private static final String[] COMMON_TEXTS = {
    "Content-Type",
    "Location",
    "application/json",
    "application/json;charset=UTF-8",
    "application/problem+json",
    "text/plain;charset=UTF-8"
  };

  private static boolean sameAscii(byte[] array, int at, String text) {
    for (int i = 0; i < text.length(); i++) {
      if (array[at + i] != text.charAt(i)) {
        return false;
      }
    }
    return true;
  }

  private static byte[] encodeWithStreams(StoredResponse response, byte[] body) throws IOException {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream(body.length + 128);
    DataOutputStream out = new DataOutputStream(bytes);
    out.writeByte(FORMAT_2);
    out.writeShort(response.status);
    out.writeShort(response.headers.size());
    for (Map.Entry<String, String> header : response.headers) {
      out.writeUTF(header.getKey());
      out.writeUTF(header.getValue());
    }
    out.writeBoolean(response.body != null);
    out.writeInt(body.length);
    out.write(body);
    return bytes.toByteArray();
  }

  private static StoredResponse decodeWithStreams(byte[] bytes) throws IOException {
    DataInputStream in = new DataInputStream(new ByteArrayInputStream(bytes));
    byte format = in.readByte();
    int status = in.readUnsignedShort();
    int count = in.readUnsignedShort();
    List<Map.Entry<String, String>> headers = new ArrayList<>(count);
    for (int i = 0; i < count; i++) {
      headers.add(Map.entry(in.readUTF(), in.readUTF()));
    }
    boolean stored = format == FORMAT_1 || in.readBoolean();
    byte[] body = new byte[in.readInt()];
    in.readFully(body);
    return new StoredResponse(status, List.copyOf(headers), stored ? body : null);
  }
}
