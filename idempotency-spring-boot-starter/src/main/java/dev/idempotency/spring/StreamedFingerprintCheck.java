package dev.idempotency.spring;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Objects;

/**
 * Whether a mapper's streamed fingerprint ({@link CanonicalJsonWriter}) may be used: it must equal
 * the fingerprint of the mapper's tree on a set of probe documents first. Stateless.
 */
final class StreamedFingerprintCheck {

  private StreamedFingerprintCheck() {}

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
}
