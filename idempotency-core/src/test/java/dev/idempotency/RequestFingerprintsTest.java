package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** RFC 8785 canonical JSON and the fingerprints made of it. */
class RequestFingerprintsTest {

  /** Appendix B of RFC 8785: IEEE 754 doubles and how ECMAScript writes them. */
  @ParameterizedTest(name = "{0} -> {1}")
  @CsvSource({
    "0000000000000000, 0",
    "8000000000000000, 0",
    "0000000000000001, 5e-324",
    "8000000000000001, -5e-324",
    "7fefffffffffffff, 1.7976931348623157e+308",
    "ffefffffffffffff, -1.7976931348623157e+308",
    "4340000000000000, 9007199254740992",
    "c340000000000000, -9007199254740992",
    "4430000000000000, 295147905179352830000",
    "44b52d02c7e14af5, 9.999999999999997e+22",
    "44b52d02c7e14af6, 1e+23",
    "44b52d02c7e14af7, 1.0000000000000001e+23",
    "444b1ae4d6e2ef4e, 999999999999999700000",
    "444b1ae4d6e2ef4f, 999999999999999900000",
    "444b1ae4d6e2ef50, 1e+21",
    "3eb0c6f7a0b5ed8c, 9.999999999999997e-7",
    "3eb0c6f7a0b5ed8d, 0.000001",
    "41b3de4355555553, 333333333.3333332",
    "41b3de4355555554, 333333333.33333325",
    "41b3de4355555555, 333333333.3333333",
    "41b3de4355555556, 333333333.3333334",
    "41b3de4355555557, 333333333.33333343",
    "becbf647612f3696, -0.0000033333333333333333",
    "43143ff3c1cb0959, 1424953923781206.2"
  })
  void numbersAreWrittenAsEcmaScriptWritesTheirDouble(String ieeeHex, String expected) {
    double value = Double.longBitsToDouble(Long.parseUnsignedLong(ieeeHex, 16));

    assertThat(RequestFingerprints.number(value)).isEqualTo(expected);
  }

  @Test
  void theSpellingOfANumberDoesNotChangeTheFingerprint() {
    List<Object> spellings =
        Arrays.asList(
            new BigDecimal("1e2"),
            new BigDecimal("100"),
            new BigDecimal("100.0"),
            new BigDecimal("1.00E+2"),
            100,
            100L,
            BigInteger.valueOf(100));
    String expected = RequestFingerprints.ofJson(Map.of("n", 100));

    for (Object spelling : spellings) {
      assertThat(RequestFingerprints.ofJson(Map.of("n", spelling)))
          .as("%s", spelling)
          .isEqualTo(expected);
    }
    assertThat(RequestFingerprints.ofJson(Map.of("n", new BigDecimal("100.5"))))
        .isNotEqualTo(expected);
  }

  @Test
  void membersAreSortedByUtf16CodeUnitsAndStringsEscapedMinimally() {
    Map<String, Object> object = new LinkedHashMap<>();
    object.put("\u20ac", "Euro Sign");
    object.put("\r", "Carriage Return");
    object.put("\ufb33", "Hebrew Letter Dalet With Dagesh");
    object.put("1", "One");
    object.put("\ud83d\ude00", "Emoji: Grinning Face");
    object.put("\u0080", "Control");
    object.put("\u00f6", "Latin Small Letter O With Diaeresis");

    String canonical = RequestFingerprints.canonicalJson(object);

    assertThat(canonical)
        .isEqualTo(
            "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\","
                + "\"\u00f6\":\"Latin Small Letter O With Diaeresis\",\"\u20ac\":\"Euro Sign\","
                + "\"\ud83d\ude00\":\"Emoji: Grinning Face\","
                + "\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}");
  }

  @Test
  void literalsArraysAndControlCharacters() {
    Map<String, Object> object = new LinkedHashMap<>();
    object.put("b", Arrays.asList(true, false, null, "a\u0001b/\"\\\t"));
    object.put("a", Map.of());

    assertThat(RequestFingerprints.canonicalJson(object))
        .isEqualTo("{\"a\":{},\"b\":[true,false,null,\"a\\u0001b/\\\"\\\\\\t\"]}");
  }

  @Test
  void fingerprintsAreSha256InHex() {
    assertThat(RequestFingerprints.ofBytes(new byte[0]))
        .isEqualTo("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    assertThat(RequestFingerprints.ofJson(List.of())).hasSize(64).matches("[0-9a-f]+");
  }

  @Test
  void whatJsonCannotHoldIsRefused() {
    assertThatThrownBy(() -> RequestFingerprints.ofJson(Map.of(1, "x")))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("names must be strings");
    assertThatThrownBy(() -> RequestFingerprints.ofJson(Double.NaN))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> RequestFingerprints.ofJson(new Object()))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("not a parsed JSON value");
  }

  /** Two 64-bit ids one apart are two requests; equal values in any spelling are one. */
  @Test
  void numbersKeepEveryDigit() {
    assertThat(RequestFingerprints.ofJson(java.util.Map.of("user_id", 1234567890123456789L)))
        .isNotEqualTo(
            RequestFingerprints.ofJson(java.util.Map.of("user_id", 1234567890123456788L)));
    assertThat(RequestFingerprints.canonicalJson(new BigDecimal("1234567890123456789")))
        .isEqualTo("1234567890123456789");
    assertThat(RequestFingerprints.canonicalJson(java.util.List.of(1, 1.0, new BigDecimal("1e0"))))
        .isEqualTo("[1,1,1]");
  }
}
