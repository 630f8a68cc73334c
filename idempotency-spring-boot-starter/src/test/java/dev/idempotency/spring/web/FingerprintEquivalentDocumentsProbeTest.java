package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.JsonCodecs;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * Probe (probeA) of the JSON fingerprint after 3c59fff: groups of bodies that are one JSON document
 * written differently (key order, white space, unicode escapes, number forms that
 * docs/spring-boot.md calls one number: "key order and white space do not matter, {@code 1}, {@code
 * 1.0}, {@code 1e0} are one number"; RFC 8785 strings) must give one fingerprint on every path a
 * deployment may take: Jackson 2 and Jackson 3 codecs (a retry after an upgrade from one to the
 * other), each streamed and as its tree. Documents that differ must not share one. Each fingerprint
 * is taken as {@link BodyFingerprint} takes it for a request.
 */
class FingerprintEquivalentDocumentsProbeTest {

  /** Groups of one document written differently. */
  static Map<String, List<String>> sameDocuments() {
    Map<String, List<String>> groups = new LinkedHashMap<>();
    groups.put(
        "key order and white space",
        List.of(
            "{\"to\":\"+15550100\",\"template\":\"otp\",\"n\":[1,2]}",
            "{ \"template\" : \"otp\" ,\n\t\"n\" : [ 1 , 2 ] , \"to\":\"+15550100\" }\r\n",
            "{\"n\":[1,2],\"to\":\"+15550100\",\"template\":\"otp\"}"));
    groups.put(
        "nested key order",
        List.of(
            "{\"a\":{\"y\":1,\"x\":{\"q\":2,\"p\":3}},\"b\":[{\"d\":1,\"c\":2}]}",
            "{\"b\":[{\"c\":2,\"d\":1}],\"a\":{\"x\":{\"p\":3,\"q\":2},\"y\":1}}"));
    groups.put(
        "unicode escapes in values",
        List.of(
            "{\"name\":\"Ren\u00e9e \uD83D\uDE00\"}",
            "{\"name\":\"Ren\\u00e9e \\ud83d\\ude00\"}",
            "{\"name\":\"Ren\\u00E9e \\uD83D\\uDE00\"}"));
    groups.put(
        "unicode escapes in names",
        List.of(
            "{\"\u00e9t\u00e9\":1,\"a\":2}",
            "{\"a\":2,\"\\u00e9t\\u00e9\":1}",
            "{\"\\u00e9t\\u00e9\":1,\"\\u0061\":2}"));
    groups.put(
        "escaped solidus and other escapes",
        List.of(
            "{\"u\":\"a/b\",\"t\":\"x\\ty\",\"q\":\"\\\"\"}",
            "{\"u\":\"a\\/b\",\"t\":\"x\\u0009y\",\"q\":\"\\u0022\"}"));
    groups.put("one", List.of("{\"n\":1}", "{\"n\":1.0}", "{\"n\":1e0}", "{\"n\":1.000}"));
    groups.put(
        "one hundred",
        List.of(
            "{\"n\":100}",
            "{\"n\":1e2}",
            "{\"n\":1E2}",
            "{\"n\":1e+2}",
            "{\"n\":100.0}",
            "{\"n\":10.0e1}",
            "{\"n\":1000e-1}"));
    groups.put("a half", List.of("{\"n\":0.5}", "{\"n\":5e-1}", "{\"n\":0.50}", "{\"n\":50E-2}"));
    groups.put(
        "a large integer",
        List.of(
            "{\"id\":1234567890123456789}",
            "{\"id\":1.234567890123456789e18}",
            "{\"id\":1234567890123456789.0}"));
    groups.put("zero", List.of("{\"n\":0}", "{\"n\":0.0}", "{\"n\":0e5}"));
    groups.put(
        "negative zero (RFC 8785 writes -0 as 0)",
        List.of("{\"n\":0}", "{\"n\":-0}", "{\"n\":-0.0}"));
    groups.put("in arrays", List.of("[1,2.0,3e0]", "[1.0, 2, 3]"));
    groups.put(
        "a repeated name: the last one counts (as the tree reads it)",
        List.of("{\"a\":1,\"a\":2}", "{\"a\":2}"));
    return groups;
  }

  /** Pairs of documents that differ. */
  static Map<String, List<String>> differentDocuments() {
    Map<String, List<String>> pairs = new LinkedHashMap<>();
    pairs.put("array order", List.of("[1,2]", "[2,1]"));
    pairs.put(
        "two 64-bit ids", List.of("{\"id\":1234567890123456789}", "{\"id\":1234567890123456788}"));
    pairs.put("string and number", List.of("{\"n\":1}", "{\"n\":\"1\"}"));
    pairs.put("nested value", List.of("{\"a\":{\"b\":1}}", "{\"a\":{\"b\":2}}"));
    pairs.put("precomposed and decomposed", List.of("{\"s\":\"\u00e9\"}", "{\"s\":\"e\u0301\"}"));
    return pairs;
  }

  @Test
  void oneDocumentWrittenDifferentlyHasOneFingerprintOnEveryPath() {
    Map<String, JsonCodecs> paths = paths();
    List<String> differences = new ArrayList<>();
    for (Map.Entry<String, List<String>> group : sameDocuments().entrySet()) {
      String reference = null;
      String referenceWhere = null;
      for (String body : group.getValue()) {
        for (Map.Entry<String, JsonCodecs> path : paths.entrySet()) {
          String fingerprint =
              StreamingFingerprintEdgesProbeTest.outcome(utf8(body), path.getValue());
          String where = path.getKey() + " " + body;
          if (reference == null) {
            reference = fingerprint;
            referenceWhere = where;
          } else if (!reference.equals(fingerprint)) {
            differences.add(
                group.getKey()
                    + ": "
                    + where
                    + " -> "
                    + abbreviate(fingerprint)
                    + ", but "
                    + referenceWhere
                    + " -> "
                    + abbreviate(reference));
          }
        }
      }
    }
    assertThat(differences).as("paths: %s", paths.keySet()).isEmpty();
  }

  @Test
  void differentDocumentsHaveDifferentFingerprints() {
    Map<String, JsonCodecs> paths = paths();
    List<String> same = new ArrayList<>();
    for (Map.Entry<String, List<String>> pair : differentDocuments().entrySet()) {
      for (Map.Entry<String, JsonCodecs> path : paths.entrySet()) {
        String first =
            StreamingFingerprintEdgesProbeTest.outcome(
                utf8(pair.getValue().get(0)), path.getValue());
        String second =
            StreamingFingerprintEdgesProbeTest.outcome(
                utf8(pair.getValue().get(1)), path.getValue());
        if (first.equals(second)) {
          same.add(pair.getKey() + " on " + path.getKey());
        }
      }
    }
    assertThat(same).isEmpty();
  }

  /** Jackson 2 and (where present) Jackson 3, each streamed and as its tree. */
  private static Map<String, JsonCodecs> paths() {
    Map<String, JsonCodecs> paths = new LinkedHashMap<>();
    JsonCodecs j2 = codecs(StreamingFingerprintEdgesProbeTest.J2::plain);
    if (j2 != null) {
      paths.put("j2 streamed", j2);
      paths.put("j2 tree", StreamingFingerprintEdgesProbeTest.treeOnly(j2));
    }
    JsonCodecs j3 = codecs(StreamingFingerprintEdgesProbeTest.J3::plain);
    if (j3 != null) {
      paths.put("j3 streamed", j3);
      paths.put("j3 tree", StreamingFingerprintEdgesProbeTest.treeOnly(j3));
    }
    assertThat(paths).isNotEmpty();
    return paths;
  }

  private static JsonCodecs codecs(Supplier<JsonCodecs> mapper) {
    try {
      return mapper.get();
    } catch (LinkageError absent) {
      return null;
    }
  }

  private static String abbreviate(String fingerprint) {
    return fingerprint.length() > 12 ? fingerprint.substring(0, 12) + ".." : fingerprint;
  }

  private static byte[] utf8(String text) {
    return text.getBytes(StandardCharsets.UTF_8);
  }
}
