package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The stored response's bytes are {@link DataOutputStream}'s format (version, status, headers as
 * {@code writeUTF}, whether the body is stored, the body), byte for byte, whichever way the codec
 * writes and reads them (issue 39: plain ASCII headers without the streams). Records written by an
 * earlier release must replay, and records written now must replay on an earlier release.
 */
class StoredResponseReplayFormatTest {

  /** The format as every release so far wrote it, with the JDK's streams. */
  private static byte[] reference(StoredResponse response, boolean version1) throws IOException {
    byte[] body = response.body() != null ? response.body() : new byte[0];
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    DataOutputStream out = new DataOutputStream(bytes);
    out.writeByte(version1 ? 1 : 2);
    out.writeShort(response.status());
    out.writeShort(response.headers().size());
    for (Map.Entry<String, String> header : response.headers()) {
      out.writeUTF(header.getKey());
      out.writeUTF(header.getValue());
    }
    if (!version1) {
      out.writeBoolean(response.body() != null);
    }
    out.writeInt(body.length);
    out.write(body);
    return bytes.toByteArray();
  }

  private static List<StoredResponse> responses() {
    byte[] large = new byte[1 << 20];
    new Random(39).nextBytes(large);
    return List.of(
        new StoredResponse(
            200, List.of(Map.entry("Content-Type", "application/json")), "{}".getBytes()),
        new StoredResponse(201, List.of(), new byte[0]),
        new StoredResponse(404, List.of(Map.entry("Location", "/orders/42")), null),
        new StoredResponse(
            302,
            List.of(
                Map.entry("Location", "/caf\u00e9/\u20ac/\ud83d\ude00"),
                Map.entry("X-Empty", ""),
                Map.entry("X-Nul", "a\u0000b"),
                Map.entry("X-\u00e9", "v")),
            new byte[] {0, -1, 127, -128}),
        new StoredResponse(65535, List.of(Map.entry("X-Long", "x".repeat(65535))), large),
        new StoredResponse(0, List.of(Map.entry("A", "1"), Map.entry("A", "2")), new byte[1]),
        // the texts a replay reads as shared strings, and texts of their lengths that differ
        new StoredResponse(
            200,
            List.of(
                Map.entry("Content-Type", "application/json;charset=UTF-8"),
                Map.entry("Content-Typf", "application/jsoN"),
                Map.entry("Location", "text/plain;charset=UTF-8"),
                Map.entry("X-Problem", "application/problem+json"),
                Map.entry("Locatio\u00e9", "application/json;charset=UTF-9")),
            "{}".getBytes()));
  }

  @Test
  void encodedBytesAreTheStreamsFormatByteForByte() throws Exception {
    for (StoredResponse response : responses()) {
      assertThat(StoredResponse.CODEC.encode(response))
          .as("status %d", response.status())
          .isEqualTo(reference(response, false));
    }
  }

  @Test
  void bothVersionsDecodeToWhatWasStored() throws Exception {
    for (StoredResponse response : responses()) {
      for (boolean version1 : new boolean[] {false, true}) {
        StoredResponse decoded = StoredResponse.CODEC.decode(reference(response, version1));

        assertThat(decoded.status()).isEqualTo(response.status());
        assertThat(decoded.headers()).isEqualTo(response.headers());
        byte[] expected =
            response.body() != null || version1
                ? (response.body() != null ? response.body() : new byte[0])
                : null;
        assertThat(decoded.body()).isEqualTo(expected);
      }
    }
  }

  @Test
  void aHeaderTooLongForTheFormatIsRefusedAsBefore() {
    StoredResponse response =
        new StoredResponse(200, List.of(Map.entry("X-Long", "x".repeat(65536))), new byte[0]);

    assertThatThrownBy(() -> StoredResponse.CODEC.encode(response))
        .isInstanceOf(java.io.UTFDataFormatException.class);
  }

  @Test
  void whatIsNotAStoredResponseIsAnIoException() throws Exception {
    byte[] whole = reference(responses().get(3), false);
    List<Integer> cuts = new ArrayList<>();
    for (int cut = 0; cut < whole.length; cut++) {
      cuts.add(cut);
    }
    for (int cut : cuts) {
      byte[] part = Arrays.copyOf(whole, cut);
      assertThatThrownBy(() -> StoredResponse.CODEC.decode(part))
          .as("cut at %d of %d", cut, whole.length)
          .isInstanceOf(IOException.class);
    }
    assertThatThrownBy(() -> StoredResponse.CODEC.decode(new byte[] {3, 0, 0}))
        .isInstanceOf(IOException.class)
        .hasMessageContaining("known version");
  }
}
