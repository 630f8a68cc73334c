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

/**
 * The response a client saw, as stored for replays: status, the headers that matter ({@code
 * Content-Type}, {@code Location}, those the endpoint lists) and the body's bytes. Encoded in a
 * small versioned binary form of its own, never with Java serialization.
 */
record StoredResponse(int status, List<Map.Entry<String, String>> headers, byte[] body) {

  private static final byte FORMAT = 1;

  /** What a handler answered, read off the caching wrapper before anything reaches the client. */
  static StoredResponse capture(
      HttpServletResponse response, byte[] body, List<String> listedHeaders) {
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

  /** Writes it to a response that has nothing written yet. */
  void replayTo(HttpServletResponse response, String replayedHeader) throws IOException {
    response.setStatus(status);
    for (Map.Entry<String, String> header : headers) {
      if (header.getKey().equals("Content-Type")) {
        response.setContentType(header.getValue());
      } else {
        response.addHeader(header.getKey(), header.getValue());
      }
    }
    response.setHeader(replayedHeader, "true");
    response.setContentLength(body.length);
    response.getOutputStream().write(body);
  }

  /** The codec the filter stores responses with. */
  static final ResultCodec<StoredResponse> CODEC =
      new ResultCodec<>() {
        @Override
        public byte[] encode(StoredResponse response) throws IOException {
          ByteArrayOutputStream bytes = new ByteArrayOutputStream(response.body.length + 128);
          DataOutputStream out = new DataOutputStream(bytes);
          out.writeByte(FORMAT);
          out.writeShort(response.status);
          out.writeShort(response.headers.size());
          for (Map.Entry<String, String> header : response.headers) {
            out.writeUTF(header.getKey());
            out.writeUTF(header.getValue());
          }
          out.writeInt(response.body.length);
          out.write(response.body);
          return bytes.toByteArray();
        }

        @Override
        public StoredResponse decode(byte[] bytes) throws IOException {
          DataInputStream in = new DataInputStream(new ByteArrayInputStream(bytes));
          if (in.readByte() != FORMAT) {
            throw new IOException("not a stored response of this version");
          }
          int status = in.readUnsignedShort();
          int count = in.readUnsignedShort();
          List<Map.Entry<String, String>> headers = new ArrayList<>(count);
          for (int i = 0; i < count; i++) {
            headers.add(Map.entry(in.readUTF(), in.readUTF()));
          }
          byte[] body = new byte[in.readInt()];
          in.readFully(body);
          return new StoredResponse(status, List.copyOf(headers), body);
        }
      };
}
