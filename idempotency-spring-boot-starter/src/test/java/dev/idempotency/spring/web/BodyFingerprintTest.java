package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.JsonCodecs;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;

/**
 * The value of a request's fingerprint, computed here from its definition (SHA-256 in hex of the
 * path, the query and the body's canonical form or digest), so that making it cheaper (issue 39:
 * one digest instance per thread, the content type parsed once) cannot change it: a stored
 * fingerprint must match a retry's after an upgrade, or the retry gets 422.
 */
class BodyFingerprintTest {

  /** Jackson's parse as the starter reads it, without a Spring context: a fixed tree. */
  private static final JsonCodecs JSON =
      new JsonCodecs() {
        @Override
        public <T> dev.idempotency.ResultCodec<T> codecFor(java.lang.reflect.Type type) {
          throw new UnsupportedOperationException();
        }

        @Override
        public Object readTree(byte[] json) {
          Map<String, Object> tree = new TreeMap<>();
          tree.put("to", "+15550100");
          tree.put("code", new java.math.BigDecimal("123456"));
          return tree;
        }
      };

  @Test
  void aJsonBodyCountsByTheDigestOfItsCanonicalForm() throws Exception {
    byte[] body = "{\"to\":\"+15550100\",\"code\":123456}".getBytes(StandardCharsets.UTF_8);

    String expected =
        sha256Hex("/orders?a=1\njson:" + sha256Hex("{\"code\":123456,\"to\":\"+15550100\"}"));

    assertThat(BodyFingerprint.ofBody("/orders", "a=1", "application/json", body, JSON))
        .isEqualTo(expected);
    assertThat(
            BodyFingerprint.ofBody(
                "/orders", "a=1", "application/problem+json;charset=UTF-8", body, JSON))
        .isEqualTo(expected);
  }

  @Test
  void aFormCountsByItsParametersSortedByName() throws Exception {
    byte[] body = "b=2&a=x%20y&b=1".getBytes(StandardCharsets.UTF_8);

    String expected =
        sha256Hex("/form?\nform:" + sha256Hex("{\"a\":[\"x y\"],\"b\":[\"2\",\"1\"]}"));

    assertThat(
            BodyFingerprint.ofBody("/form", null, "application/x-www-form-urlencoded", body, JSON))
        .isEqualTo(expected);
  }

  @Test
  void otherBodiesCountByTheirBytesAsDoesAContentTypeThatDoesNotParse() throws Exception {
    byte[] body = {0, 1, 2, (byte) 0xff};
    String expected = sha256Hex("/raw?q\nbytes:" + sha256Hex(body));

    assertThat(BodyFingerprint.ofBody("/raw", "q", "application/octet-stream", body, JSON))
        .isEqualTo(expected);
    assertThat(BodyFingerprint.ofBody("/raw", "q", "not a type;;", body, JSON)).isEqualTo(expected);
    assertThat(BodyFingerprint.ofBody("/raw", "q", null, body, JSON)).isEqualTo(expected);
    // an empty JSON body is not parsed: it counts by its (no) bytes
    assertThat(BodyFingerprint.ofBody("/raw", null, "application/json", new byte[0], JSON))
        .isEqualTo(sha256Hex("/raw?\nbytes:" + sha256Hex(new byte[0])));
  }

  @Test
  void multipartPartsCountByTheirDescriptions() throws Exception {
    List<Object> parts = List.of(Map.of("name", "file", "content", sha256Hex("hello")));

    assertThat(BodyFingerprint.ofParts("/upload", null, parts))
        .isEqualTo(
            sha256Hex(
                "/upload?\nmultipart:"
                    + sha256Hex(
                        "[{\"content\":\"" + sha256Hex("hello") + "\",\"name\":\"file\"}]")));
  }

  @Test
  void manyFingerprintsOnManyThreadsAgree() throws Exception {
    byte[] body = "{\"to\":\"+15550100\",\"code\":123456}".getBytes(StandardCharsets.UTF_8);
    String expected = BodyFingerprint.ofBody("/orders", null, "application/json", body, JSON);
    List<Thread> threads = new java.util.ArrayList<>();
    java.util.concurrent.ConcurrentLinkedQueue<String> seen =
        new java.util.concurrent.ConcurrentLinkedQueue<>();
    for (int t = 0; t < 4; t++) {
      Thread thread =
          new Thread(
              () -> {
                for (int i = 0; i < 500; i++) {
                  seen.add(BodyFingerprint.ofBody("/orders", null, "application/json", body, JSON));
                }
              });
      threads.add(thread);
      thread.start();
    }
    for (Thread thread : threads) {
      thread.join(60_000);
    }
    assertThat(seen).hasSize(2000).containsOnly(expected);
  }

  private static String sha256Hex(String text) throws Exception {
    return sha256Hex(text.getBytes(StandardCharsets.UTF_8));
  }

  private static String sha256Hex(byte[] bytes) throws Exception {
    return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(bytes));
  }
}
