package dev.idempotency.spring.web;

import dev.idempotency.ResultCodec;
import jakarta.servlet.http.HttpServletResponse;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
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

  /** The codec the filter stores responses with. */
  static final ResultCodec<StoredResponse> CODEC =
      new ResultCodec<>() {
        @Override
        public byte[] encode(StoredResponse response) throws IOException {
          byte[] body = response.body != null ? response.body : new byte[0];
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

        @Override
        public StoredResponse decode(byte[] bytes) throws IOException {
          DataInputStream in = new DataInputStream(new ByteArrayInputStream(bytes));
          byte format = in.readByte();
          if (format != FORMAT_1 && format != FORMAT_2) {
            throw new IOException("not a stored response of a known version (" + format + ")");
          }
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
      };
}
