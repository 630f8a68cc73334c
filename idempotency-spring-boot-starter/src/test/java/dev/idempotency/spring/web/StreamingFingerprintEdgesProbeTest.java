package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.ResultCodec;
import dev.idempotency.spring.JsonCodecs;
import java.io.IOException;
import java.lang.reflect.Type;
import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * probeY: the streamed JSON fingerprint against the tree's, on inputs {@link
 * StreamingJsonFingerprintTest} does not generate (nesting at and past the parser's depth limit,
 * strings and names at and past a configured length limit, numbers whose exponents overflow, wide
 * objects with repeated names past the insertion-sort threshold, BOMs and UTF-16/32 bodies) and on
 * application mappers configured with {@code spring.jackson.*}-style settings the construction
 * probes do not cover. Each body is fingerprinted as {@link BodyFingerprint} does, with the codecs
 * and with the same codecs reduced to their tree; an outcome is the fingerprint or the exception's
 * class (an exception {@link BodyFingerprint} does not catch). Every difference is listed.
 */
class StreamingFingerprintEdgesProbeTest {

  @Test
  void jackson2EdgeBodiesGiveTheTreesFingerprint() {
    List<String> differences = new ArrayList<>();
    if (usable(J2::plain)) {
      for (Map.Entry<String, Supplier<JsonCodecs>> mapper : all(J2.mappers(), J2.others())) {
        compare(mapper.getKey(), mapper.getValue().get(), differences);
      }
    }
    assertThat(differences).isEmpty();
  }

  @Test
  void jackson3EdgeBodiesGiveTheTreesFingerprint() {
    List<String> differences = new ArrayList<>();
    if (usable(J3::plain)) {
      for (Map.Entry<String, Supplier<JsonCodecs>> mapper : all(J3.mappers(), J3.others())) {
        compare(mapper.getKey(), mapper.getValue().get(), differences);
      }
    }
    assertThat(differences).isEmpty();
  }

  /**
   * Was an open finding, fixed (fixfp: the streamed path reads a string past the mapper's limit as
   * the tree does; an out-of-range number is an IllegalArgumentException on both) (probeY, low): a
   * mapper whose parser limits string length ({@code StreamReadConstraints.maxStringLength}, here
   * 1,000; Jackson's default is 20M chars on 2.x, so with the default 1 MB max-body-size only an
   * application that lowers it meets this) fails the tree on a longer string value (the body then
   * counts by its bytes) while the streamed path, which reads the characters without {@code
   * getText()}, misses the limit whenever the string fits one (recycled, grown by the earlier
   * bodies) text buffer segment, since the parser checks only as a segment fills, and fingerprints
   * it as canonical JSON: a different fingerprint for the same body, so a retry of a key first sent
   * before the upgrade gets 422 key-reused. Fails on Boot 3.5 (Jackson 2: strings of 1,001, 1,999
   * and 5,000 chars, plain and escaped) and Boot 4.0 (Jackson 2 likewise; Jackson 3: 1,001 chars):
   * "j2 small limits / string of 1001: streamed aae99bc6.., tree b9cea78c..".
   */
  @Test
  void aStringPastTheParsersLengthLimitGivesTheTreesFingerprint() {
    List<String> differences = new ArrayList<>();
    if (usable(J2::plain)) {
      for (Map.Entry<String, Supplier<JsonCodecs>> mapper : J2.smallLimits().entrySet()) {
        compare(mapper.getKey(), mapper.getValue().get(), differences);
      }
    }
    if (usable(J3::plain)) {
      for (Map.Entry<String, Supplier<JsonCodecs>> mapper : J3.smallLimits().entrySet()) {
        compare(mapper.getKey(), mapper.getValue().get(), differences);
      }
    }
    assertThat(differences).isEmpty();
  }

  /**
   * Was an open finding, fixed (fixfp: the streamed path reads a string past the mapper's limit as
   * the tree does; an out-of-range number is an IllegalArgumentException on both) (probeY, low; not
   * from the streaming change: the tree path throws the same): a JSON body holding {@code
   * 100e2147483647} makes the fingerprint throw {@link ArithmeticException} ({@code
   * BigDecimal.stripTrailingZeros} underflows its scale in {@code
   * RequestFingerprints.exactNumber}), which {@link BodyFingerprint#json} does not catch: the
   * request fails with that exception instead of being fingerprinted by its bytes. Nothing is sent.
   * Fails on Boot 3.5 and 4.0: "number 100e2147483647: threw java.lang.ArithmeticException".
   *
   * <p>Every edge body is fingerprinted (as JSON or by its bytes) without an exception that {@link
   * BodyFingerprint} lets through to the request.
   */
  @Test
  void everyEdgeBodyIsFingerprintedWithoutAnException() {
    List<String> thrown = new ArrayList<>();
    Supplier<JsonCodecs> mapper = usable(J3::plain) ? J3::plain : J2::plain;
    JsonCodecs codecs = mapper.get();
    for (Map.Entry<String, byte[]> body : bodies().entrySet()) {
      String streamed = outcome(body.getValue(), codecs);
      if (streamed.startsWith("threw")) {
        thrown.add(body.getKey() + ": " + streamed);
      }
    }
    assertThat(thrown).isEmpty();
  }

  private static List<Map.Entry<String, Supplier<JsonCodecs>>> all(
      Map<String, Supplier<JsonCodecs>> first, Map<String, Supplier<JsonCodecs>> second) {
    List<Map.Entry<String, Supplier<JsonCodecs>>> all = new ArrayList<>(first.entrySet());
    all.addAll(second.entrySet());
    return all;
  }

  private static void compare(String name, JsonCodecs codecs, List<String> differences) {
    JsonCodecs tree = treeOnly(codecs);
    for (Map.Entry<String, byte[]> body : bodies().entrySet()) {
      String streamed = outcome(body.getValue(), codecs);
      String treed = outcome(body.getValue(), tree);
      if (!streamed.equals(treed)) {
        differences.add(
            name + " / " + body.getKey() + ": streamed " + streamed + ", tree " + treed);
      }
    }
  }

  static Map<String, byte[]> bodies() {
    Map<String, byte[]> bodies = new LinkedHashMap<>();
    for (int depth : new int[] {10, 499, 500, 501, 999, 1000, 1001, 1500}) {
      bodies.put("objects nested " + depth, utf8(nested(depth, true)));
      bodies.put("arrays nested " + depth, utf8(nested(depth, false)));
    }
    for (int length : new int[] {10, 199, 200, 201, 499, 500, 501, 999, 1000, 1001, 1999, 5000}) {
      String text = "x".repeat(length);
      bodies.put("string of " + length, utf8("{\"b\":1,\"a\":\"" + text + "\"}"));
      bodies.put("name of " + length, utf8("{\"b\":1,\"" + text + "\":1}"));
      bodies.put("escaped string of " + length, utf8("[\"" + "\\u0061".repeat(length) + "\"]"));
    }
    String[] numbers = {
      "100e2147483647",
      "1e2147483647",
      "10e2147483647",
      "1e-2147483647",
      "1e-2147483648",
      "1e400",
      "-1e-400",
      "1.0E2",
      "0.000",
      "-0",
      "-0.0",
      "0e-999999999",
      "1" + "0".repeat(999),
      "1" + "0".repeat(1000),
      "0." + "0".repeat(998) + "1",
      "123456789012345678901234567890.123456789012345678901234567890",
      "1e-7",
      "9.999999999999999e22"
    };
    for (String number : numbers) {
      bodies.put(
          "number " + abbreviate(number), utf8("{\"z\":" + number + ",\"a\":[" + number + "]}"));
    }
    StringBuilder wide = new StringBuilder("{");
    Random random = new Random(7);
    for (int i = 0; i < 120; i++) {
      if (i > 0) {
        wide.append(',');
      }
      int n = random.nextInt(40);
      wide.append("\"k").append(n).append("\":");
      wide.append(
          i % 3 == 0 ? "{\"y\":" + i + ",\"x\":{\"b\":1,\"a\":" + i + ",\"b\":2}}" : "" + i);
    }
    bodies.put("wide object with repeats", utf8(wide.append('}').toString()));
    bodies.put(
        "repeat holding a bigger object",
        utf8("{\"a\":{\"z\":1,\"y\":{\"q\":[1,{\"d\":1,\"c\":2}]}},\"a\":2,\"0\":3}"));
    bodies.put("empty string", utf8("{\"b\":\"\",\"a\":[\"\"]}"));
    bodies.put("single value", utf8("{\"a\":\"x\",\"b\":[\"x\"],\"c\":[[1]]}"));
    bodies.put("escaped name equals plain", utf8("{\"\\u0061\":1,\"a\":2}"));
    String document = "{\"b\":[1,\"\u00e9\\ud83d\\ude00\"],\"a\":{\"y\":1,\"x\":2}}";
    bodies.put(
        "utf-8 bom", concat(new byte[] {(byte) 0xef, (byte) 0xbb, (byte) 0xbf}, utf8(document)));
    bodies.put("utf-16be", document.getBytes(StandardCharsets.UTF_16BE));
    bodies.put("utf-16le", document.getBytes(StandardCharsets.UTF_16LE));
    bodies.put("utf-16 bom", document.getBytes(StandardCharsets.UTF_16));
    bodies.put("utf-32be", document.getBytes(Charset.forName("UTF-32BE")));
    bodies.put("utf-32le", document.getBytes(Charset.forName("UTF-32LE")));
    bodies.put("trailing garbage", utf8("{\"a\":1}x"));
    bodies.put("trailing bracket", utf8("{\"a\":1}]"));
    bodies.put("trailing nul", utf8("{\"a\":1}\u0000"));
    bodies.put("control char in string", utf8("[\"a\u0001b\"]"));
    return bodies;
  }

  private static String nested(int depth, boolean objects) {
    StringBuilder text = new StringBuilder();
    for (int i = 0; i < depth; i++) {
      text.append(objects ? "{\"z\":1,\"y\":2,\"y\":" : "[1,");
    }
    text.append("0");
    for (int i = 0; i < depth; i++) {
      text.append(objects ? ",\"a\":3}" : ",2]");
    }
    return text.toString();
  }

  static String outcome(byte[] body, JsonCodecs codecs) {
    try {
      return BodyFingerprint.ofBody("/n", null, "application/json", body, codecs);
    } catch (RuntimeException | StackOverflowError e) {
      return "threw " + e.getClass().getName();
    }
  }

  private static String abbreviate(String text) {
    return text.length() > 30 ? text.substring(0, 12) + "..(" + text.length() + ")" : text;
  }

  private static byte[] utf8(String text) {
    return text.getBytes(StandardCharsets.UTF_8);
  }

  private static byte[] concat(byte[] a, byte[] b) {
    byte[] both = new byte[a.length + b.length];
    System.arraycopy(a, 0, both, 0, a.length);
    System.arraycopy(b, 0, both, a.length, b.length);
    return both;
  }

  /** The codecs as they fingerprinted before: the tree, then its canonical form. */
  static JsonCodecs treeOnly(JsonCodecs codecs) {
    return new JsonCodecs() {
      @Override
      public <T> ResultCodec<T> codecFor(Type type) {
        return codecs.codecFor(type);
      }

      @Override
      public Object readTree(byte[] json) throws IOException {
        return codecs.readTree(json);
      }
    };
  }

  private static boolean usable(Supplier<JsonCodecs> mapper) {
    try {
      mapper.get();
      return true;
    } catch (LinkageError absent) {
      return false;
    }
  }

  /** Jackson 2 application mappers. */
  static final class J2 {
    static JsonCodecs plain() {
      return new dev.idempotency.spring.Jackson2JsonCodecs(
          new com.fasterxml.jackson.databind.ObjectMapper());
    }

    static Map<String, Supplier<JsonCodecs>> mappers() {
      Map<String, Supplier<JsonCodecs>> mappers = new LinkedHashMap<>();
      mappers.put("j2 plain", J2::plain);
      return mappers;
    }

    static Map<String, Supplier<JsonCodecs>> smallLimits() {
      Map<String, Supplier<JsonCodecs>> mappers = new LinkedHashMap<>();
      mappers.put(
          "j2 small limits",
          () -> {
            com.fasterxml.jackson.core.JsonFactory factory =
                com.fasterxml.jackson.core.JsonFactory.builder()
                    .streamReadConstraints(
                        com.fasterxml.jackson.core.StreamReadConstraints.builder()
                            .maxStringLength(1000)
                            .maxNameLength(1000)
                            .maxNestingDepth(500)
                            .build())
                    .build();
            return new dev.idempotency.spring.Jackson2JsonCodecs(
                new com.fasterxml.jackson.databind.ObjectMapper(factory));
          });
      return mappers;
    }

    static Map<String, Supplier<JsonCodecs>> others() {
      Map<String, Supplier<JsonCodecs>> mappers = new LinkedHashMap<>();
      mappers.put(
          "j2 deep limit",
          () -> {
            com.fasterxml.jackson.core.JsonFactory factory =
                com.fasterxml.jackson.core.JsonFactory.builder()
                    .streamReadConstraints(
                        com.fasterxml.jackson.core.StreamReadConstraints.builder()
                            .maxNestingDepth(100_000)
                            .build())
                    .build();
            return new dev.idempotency.spring.Jackson2JsonCodecs(
                new com.fasterxml.jackson.databind.ObjectMapper(factory));
          });
      for (com.fasterxml.jackson.databind.DeserializationFeature feature :
          List.of(
              com.fasterxml.jackson.databind.DeserializationFeature.ACCEPT_SINGLE_VALUE_AS_ARRAY,
              com.fasterxml.jackson.databind.DeserializationFeature.UNWRAP_SINGLE_VALUE_ARRAYS,
              com.fasterxml.jackson.databind.DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS,
              com.fasterxml.jackson.databind.DeserializationFeature.USE_LONG_FOR_INTS,
              com.fasterxml.jackson.databind.DeserializationFeature
                  .ACCEPT_EMPTY_STRING_AS_NULL_OBJECT,
              com.fasterxml.jackson.databind.DeserializationFeature.FAIL_ON_READING_DUP_TREE_KEY)) {
        mappers.put(
            "j2 " + feature,
            () ->
                new dev.idempotency.spring.Jackson2JsonCodecs(
                    com.fasterxml.jackson.databind.json.JsonMapper.builder()
                        .enable(feature)
                        .build()));
      }
      mappers.put(
          "j2 empty string as null (coercion)",
          () -> {
            com.fasterxml.jackson.databind.ObjectMapper mapper =
                new com.fasterxml.jackson.databind.ObjectMapper();
            mapper
                .coercionConfigDefaults()
                .setCoercion(
                    com.fasterxml.jackson.databind.cfg.CoercionInputShape.EmptyString,
                    com.fasterxml.jackson.databind.cfg.CoercionAction.AsNull);
            return new dev.idempotency.spring.Jackson2JsonCodecs(mapper);
          });
      mappers.put(
          "j2 leading zeros, missing values",
          () ->
              new dev.idempotency.spring.Jackson2JsonCodecs(
                  com.fasterxml.jackson.databind.json.JsonMapper.builder()
                      .enable(
                          com.fasterxml.jackson.core.json.JsonReadFeature
                              .ALLOW_LEADING_ZEROS_FOR_NUMBERS)
                      .enable(com.fasterxml.jackson.core.json.JsonReadFeature.ALLOW_MISSING_VALUES)
                      .enable(
                          com.fasterxml.jackson.core.json.JsonReadFeature
                              .ALLOW_UNESCAPED_CONTROL_CHARS)
                      .enable(
                          com.fasterxml.jackson.core.json.JsonReadFeature
                              .ALLOW_TRAILING_DECIMAL_POINT_FOR_NUMBERS)
                      .build()));
      return mappers;
    }
  }

  /** Jackson 3 application mappers. */
  static final class J3 {
    static JsonCodecs plain() {
      return new dev.idempotency.spring.Jackson3JsonCodecs(
          tools.jackson.databind.json.JsonMapper.builder().build());
    }

    static Map<String, Supplier<JsonCodecs>> mappers() {
      Map<String, Supplier<JsonCodecs>> mappers = new LinkedHashMap<>();
      mappers.put("j3 plain", J3::plain);
      return mappers;
    }

    static Map<String, Supplier<JsonCodecs>> smallLimits() {
      Map<String, Supplier<JsonCodecs>> mappers = new LinkedHashMap<>();
      mappers.put(
          "j3 small limits",
          () ->
              new dev.idempotency.spring.Jackson3JsonCodecs(
                  tools.jackson.databind.json.JsonMapper.builder(
                          tools.jackson.core.json.JsonFactory.builder()
                              .streamReadConstraints(
                                  tools.jackson.core.StreamReadConstraints.builder()
                                      .maxStringLength(1000)
                                      .maxNameLength(1000)
                                      .maxNestingDepth(500)
                                      .build())
                              .build())
                      .build()));
      return mappers;
    }

    static Map<String, Supplier<JsonCodecs>> others() {
      Map<String, Supplier<JsonCodecs>> mappers = new LinkedHashMap<>();
      mappers.put(
          "j3 deep limit",
          () ->
              new dev.idempotency.spring.Jackson3JsonCodecs(
                  tools.jackson.databind.json.JsonMapper.builder(
                          tools.jackson.core.json.JsonFactory.builder()
                              .streamReadConstraints(
                                  tools.jackson.core.StreamReadConstraints.builder()
                                      .maxNestingDepth(100_000)
                                      .build())
                              .build())
                      .build()));
      for (tools.jackson.databind.DeserializationFeature feature :
          List.of(
              tools.jackson.databind.DeserializationFeature.ACCEPT_SINGLE_VALUE_AS_ARRAY,
              tools.jackson.databind.DeserializationFeature.UNWRAP_SINGLE_VALUE_ARRAYS,
              tools.jackson.databind.DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS,
              tools.jackson.databind.DeserializationFeature.USE_LONG_FOR_INTS,
              tools.jackson.databind.DeserializationFeature.ACCEPT_EMPTY_STRING_AS_NULL_OBJECT,
              tools.jackson.databind.DeserializationFeature.FAIL_ON_READING_DUP_TREE_KEY)) {
        mappers.put(
            "j3 " + feature,
            () ->
                new dev.idempotency.spring.Jackson3JsonCodecs(
                    tools.jackson.databind.json.JsonMapper.builder().enable(feature).build()));
      }
      mappers.put(
          "j3 empty string as null (coercion)",
          () ->
              new dev.idempotency.spring.Jackson3JsonCodecs(
                  tools.jackson.databind.json.JsonMapper.builder()
                      .withCoercionConfigDefaults(
                          c ->
                              c.setCoercion(
                                  tools.jackson.databind.cfg.CoercionInputShape.EmptyString,
                                  tools.jackson.databind.cfg.CoercionAction.AsNull))
                      .build()));
      mappers.put(
          "j3 leading zeros, missing values",
          () ->
              new dev.idempotency.spring.Jackson3JsonCodecs(
                  tools.jackson.databind.json.JsonMapper.builder()
                      .enable(
                          tools.jackson.core.json.JsonReadFeature.ALLOW_LEADING_ZEROS_FOR_NUMBERS)
                      .enable(tools.jackson.core.json.JsonReadFeature.ALLOW_MISSING_VALUES)
                      .enable(tools.jackson.core.json.JsonReadFeature.ALLOW_UNESCAPED_CONTROL_CHARS)
                      .enable(
                          tools.jackson.core.json.JsonReadFeature
                              .ALLOW_TRAILING_DECIMAL_POINT_FOR_NUMBERS)
                      .build()));
      return mappers;
    }
  }
}
