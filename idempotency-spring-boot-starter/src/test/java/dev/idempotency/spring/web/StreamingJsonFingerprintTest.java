package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.idempotency.ResultCodec;
import dev.idempotency.spring.JsonCodecs;
import dev.idempotency.spring.TestMappers.Jackson2;
import dev.idempotency.spring.TestMappers.Jackson3;
import java.io.IOException;
import java.lang.reflect.Type;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * The streamed JSON fingerprint (issue 39: no Jackson tree per request) gives the same value as the
 * tree did for every body, or stored fingerprints would stop matching across an upgrade and every
 * retry would get 422. Property-style: thousands of generated documents (nested objects with names
 * in every order, duplicate names, unicode and lone surrogates, escapes, numbers in every spelling)
 * and broken ones (cut short, a stray character, two values, white space only), each fingerprinted
 * as {@link BodyFingerprint} does with the starter's codecs and with the same codecs reduced to
 * their tree ({@link JsonCodecs#readTree} only: the fingerprint before the change). On Jackson 3
 * (Boot 4) and Jackson 2 (Boot 3.5), with the mapper as built and with read features that change
 * what parses, and with mapper settings under which the tree reads something else (where the codecs
 * must keep using the tree).
 */
class StreamingJsonFingerprintTest {

  private static final int DOCUMENTS = 4_000;

  @Test
  void jackson3GivesTheTreesFingerprintForEveryDocument() {
    assumeTrue(usable(Jackson3::plain), "Jackson 3 does not work on this class path");
    assertSameAsTree(Jackson3.plain(), 3);
    assertSameAsTree(Jackson3.lenient(), 31);
    assertSameAsTree(Jackson3.strictDuplicates(), 32);
  }

  @Test
  void jackson2GivesTheTreesFingerprintForEveryDocument() {
    assumeTrue(usable(Jackson2::plain), "Jackson 2 does not work on this class path");
    assertSameAsTree(Jackson2.plain(), 2);
    assertSameAsTree(Jackson2.lenient(), 21);
    assertSameAsTree(Jackson2.strictDuplicates(), 22);
  }

  @Test
  void aMapperThatReadsTreesDifferentlyKeepsTheTreesFingerprint() {
    if (usable(Jackson3::plain)) {
      assertSameAsTree(Jackson3.javaArrays(), 41);
      assertSameAsTree(Jackson3.trimmedStrings(), 42);
    }
    if (usable(Jackson2::plain)) {
      assertSameAsTree(Jackson2.javaArrays(), 43);
      assertSameAsTree(Jackson2.trimmedStrings(), 44);
    }
  }

  @Test
  void handPickedBodiesGiveTheTreesFingerprint() {
    List<String> bodies =
        List.of(
            "{\"b\":1,\"a\":2}",
            "{\"a\":1,\"a\":2}",
            "{\"a\":{\"y\":1,\"x\":2},\"a\":[3]}",
            "{\"\\u00e9\":1,\"e\":2,\"\\ud83d\\ude00\":3,\"\\uffff\":4,\"\":5}",
            "{\"s\":\"\\ud800\\ud800\\udc00\\udc00 \\u0001\\u001f\\u007f\\u2028\"}",
            "[1e2, 1E+2, 100.00, -0, -0.0, 0e10, 1e21, 1e22, 1e-6, 1e-7, 123456789012345678901]",
            "[12345678901234567890123456789, 0.1000000000000000055511151231257827, -1.5e-300]",
            "[9223372036854775807, -9223372036854775808, 9223372036854775808]",
            "  {\"x\" : [ ] , \"w\" : { } }  ",
            "\"just a string\"",
            "42",
            "null",
            "{\"a\":1} {\"a\":1}",
            "{\"a\":1,}",
            "{\"a\":",
            "[1,2",
            "   ",
            "{'a':1}",
            "{\"a\":NaN}",
            "// c\n{\"a\":1}");
    List<Supplier<JsonCodecs>> mappers = new ArrayList<>();
    if (usable(Jackson3::plain)) {
      mappers.add(Jackson3::plain);
      mappers.add(Jackson3::lenient);
    }
    if (usable(Jackson2::plain)) {
      mappers.add(Jackson2::plain);
      mappers.add(Jackson2::lenient);
    }
    for (Supplier<JsonCodecs> mapper : mappers) {
      JsonCodecs codecs = mapper.get();
      JsonCodecs tree = treeOnly(codecs);
      for (String body : bodies) {
        byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
        assertThat(fingerprint(bytes, codecs)).as(body).isEqualTo(fingerprint(bytes, tree));
      }
    }
  }

  private static void assertSameAsTree(JsonCodecs codecs, long seed) {
    JsonCodecs tree = treeOnly(codecs);
    Random random = new Random(seed);
    int parsed = 0;
    for (int i = 0; i < DOCUMENTS; i++) {
      String document = new Documents(random).document();
      byte[] body = (i % 4 == 3 ? Documents.broken(document, random) : document).getBytes(UTF_8);
      String expected = fingerprint(body, tree);
      assertThat(fingerprint(body, codecs)).as("document %d: %s", i, document).isEqualTo(expected);
      if (parses(body, tree)) {
        parsed++;
      }
    }
    // the documents were mostly read as JSON, not mostly counted by their bytes
    assertThat(parsed).isGreaterThan(DOCUMENTS / 2);
  }

  private static final java.nio.charset.Charset UTF_8 = StandardCharsets.UTF_8;

  private static boolean parses(byte[] body, JsonCodecs tree) {
    try {
      tree.readTree(body);
      return true;
    } catch (IOException | RuntimeException notJson) {
      return false;
    }
  }

  private static String fingerprint(byte[] body, JsonCodecs codecs) {
    return BodyFingerprint.ofBody("/n", "q=1", "application/json", body, codecs);
  }

  /** The codecs as they fingerprinted before: the tree, then its canonical form. */
  private static JsonCodecs treeOnly(JsonCodecs codecs) {
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

  /**
   * Whether a Jackson line works on this class path: Boot 4's may lack Jackson 2, and Boot 3.5's
   * holds a Jackson 3 whose annotations (Jackson 2's) are too old for it.
   */
  private static boolean usable(Supplier<JsonCodecs> mapper) {
    try {
      mapper.get();
      return true;
    } catch (LinkageError absent) {
      return false;
    }
  }

  /** Random JSON text, pretty or compact, with what a canonical form must get right. */
  private static final class Documents {
    private static final String[] NAMES = {
      "a",
      "b",
      "A",
      "B",
      "aa",
      "ab",
      "a ",
      "",
      "id",
      "to",
      "é",
      "e",
      "z",
      "ä",
      "\u0080",
      "\ud83d\ude00",
      "\uffff",
      "\u00ff",
      "key",
      "Key",
      "k\"q",
      "k\\b",
      "\u4e2d"
    };
    private static final String[] NUMBERS = {
      "0",
      "-0",
      "0.0",
      "-0.0",
      "1",
      "-1",
      "10",
      "100",
      "1e2",
      "1E2",
      "1e+2",
      "1.0e2",
      "100.00",
      "0.5",
      "0.50",
      "5e-1",
      "1e-6",
      "1e-7",
      "0.000001",
      "0.0000001",
      "1e21",
      "1e22",
      "1e20",
      "123456789012345678901",
      "1234567890123456789012",
      "9223372036854775807",
      "-9223372036854775808",
      "9223372036854775808",
      "12345678901234567890123456789012345",
      "3.141592653589793238462643383279",
      "1.7976931348623157e308",
      "4.9e-324",
      "2e400",
      "-1.5e-300",
      "0.1",
      "0.30000000000000004",
      "123.456e-2",
      "1234.5E-1",
      "2147483648",
      "-2147483649"
    };
    private static final String[] STRINGS = {
      "",
      "x",
      "hello world",
      "\\\"quoted\\\"",
      "back\\\\slash",
      "\\/slash",
      "\\b\\f\\n\\r\\t",
      "\\u0000\\u0001\\u001f",
      "\\u007f",
      "\\u2028\\u2029",
      "é",
      "\\u00e9",
      "中文",
      "\\ud83d\\ude00",
      "😀",
      "\\ud800",
      "\\udc00",
      "\\ud800x",
      "\\udc00\\ud800",
      "tab\\tthere",
      " padded ",
      "\\u0041",
      "\u00a0nbsp"
    };

    private final Random random;

    Documents(Random random) {
      this.random = random;
    }

    String document() {
      StringBuilder out = new StringBuilder();
      value(out, 0);
      return out.toString();
    }

    private void value(StringBuilder out, int depth) {
      int kind = depth > 5 ? 2 + random.nextInt(5) : random.nextInt(depth == 0 ? 2 : 8);
      switch (kind) {
        case 0, 7 -> object(out, depth);
        case 1 -> array(out, depth);
        case 2 -> out.append(NUMBERS[random.nextInt(NUMBERS.length)]);
        case 3, 4 -> out.append('"').append(STRINGS[random.nextInt(STRINGS.length)]).append('"');
        case 5 -> out.append(random.nextBoolean() ? "true" : "false");
        default -> out.append("null");
      }
    }

    private void object(StringBuilder out, int depth) {
      int members = random.nextInt(random.nextInt(4) == 0 ? 12 : 5);
      out.append('{');
      space(out);
      for (int i = 0; i < members; i++) {
        if (i > 0) {
          out.append(',');
          space(out);
        }
        out.append('"').append(NAMES[random.nextInt(NAMES.length)]).append('"');
        space(out);
        out.append(':');
        space(out);
        value(out, depth + 1);
        space(out);
      }
      out.append('}');
    }

    private void array(StringBuilder out, int depth) {
      int elements = random.nextInt(6);
      out.append('[');
      for (int i = 0; i < elements; i++) {
        if (i > 0) {
          out.append(',');
        }
        space(out);
        value(out, depth + 1);
      }
      space(out);
      out.append(']');
    }

    private void space(StringBuilder out) {
      if (random.nextInt(5) == 0) {
        out.append(random.nextBoolean() ? " " : "\n\t ");
      }
    }

    /** The document broken, or not quite: cut, a stray character, two values, blank. */
    static String broken(String document, Random random) {
      return switch (random.nextInt(6)) {
        case 0 -> document.substring(0, random.nextInt(document.length() + 1));
        case 1 -> {
          int at = random.nextInt(document.length() + 1);
          String strays = "{}[],:\"'x0-.e \\/";
          String stray = String.valueOf(strays.charAt(random.nextInt(strays.length())));
          yield document.substring(0, at) + stray + document.substring(at);
        }
        case 2 -> document + " " + document;
        case 3 -> "  \n ";
        case 4 -> document.replace(":", random.nextBoolean() ? ": NaN ," : ":'x',");
        default -> "/* c */ " + document + " // end";
      };
    }
  }
}
