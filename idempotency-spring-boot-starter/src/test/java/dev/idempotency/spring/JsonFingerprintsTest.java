package dev.idempotency.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.RequestFingerprints;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The exact canonical JSON of {@link JsonFingerprints}: RFC 8785's form wherever a double holds the
 * number as written, every digit kept where it does not.
 */
class JsonFingerprintsTest {

  static String number(String text) {
    return JsonFingerprints.canonicalJson(new BigDecimal(text));
  }

  @Test
  void equalValuesInAnySpellingHaveOneForm() {
    assertThat(Arrays.asList(number("1"), number("1.0"), number("1e0"), number("10E-1")))
        .containsOnly("1");
    assertThat(JsonFingerprints.canonicalJson(BigInteger.ONE)).isEqualTo("1");
    assertThat(JsonFingerprints.canonicalJson(1L)).isEqualTo("1");
    assertThat(number("-0.0")).isEqualTo("0");
    assertThat(number("4.50")).isEqualTo("4.5");
    assertThat(number("1e2")).isEqualTo("100");
  }

  @Test
  void numbersThatDifferInAnyDigitStayDifferent() {
    assertThat(number("1234567890123456789")).isEqualTo("1234567890123456789");
    assertThat(number("1234567890123456788")).isEqualTo("1234567890123456788");
    assertThat(number("0.30000000000000001")).isNotEqualTo(number("0.3"));
    assertThat(JsonFingerprints.of(Map.of("user_id", new BigInteger("1234567890123456789"))))
        .isNotEqualTo(
            JsonFingerprints.of(Map.of("user_id", new BigInteger("1234567890123456788"))));
  }

  @Test
  void rfc8785WouldRoundThemToOneDouble() {
    // the departure, documented: RFC 8785 writes each number as its nearest IEEE double, and
    // these two are one double; the canonical forms here keep them apart
    BigInteger id = new BigInteger("1234567890123456789");
    BigInteger next = new BigInteger("1234567890123456788");
    assertThat(id.doubleValue()).isEqualTo(next.doubleValue());
    assertThat(RequestFingerprints.canonicalJson(id))
        .isNotEqualTo(RequestFingerprints.canonicalJson(next));
  }

  @Test
  void numbersADoubleHoldsAreWrittenAsRfc8785WritesThem() {
    for (String text :
        List.of(
            "0",
            "1",
            "-1",
            "4.5",
            "0.1",
            "100",
            "123456789012345",
            "1e21",
            "1e20",
            "1.5e-7",
            "0.000001",
            "-2.5e30",
            "333333333.3333333",
            "9007199254740992")) {
      assertThat(number(text))
          .as(text)
          .isEqualTo(RequestFingerprints.canonicalJson(new BigDecimal(text)));
    }
  }

  @Test
  void hugeExponentsStayShort() {
    assertThat(number("1e999999999")).isEqualTo("1e+999999999");
    assertThat(number("-12.5e-999999")).isEqualTo("-1.25e-999998");
  }

  @Test
  void objectsAreSortedAndStringsEscapedAsRfc8785Does() {
    Map<String, Object> object = new LinkedHashMap<>();
    object.put("b", List.of(1, "x\n", true));
    object.put("a", null);
    object.put("é", new BigDecimal("2.0"));

    assertThat(JsonFingerprints.canonicalJson(object))
        .isEqualTo("{\"a\":null,\"b\":[1,\"x\\n\",true],\"é\":2}");
  }

  @Test
  void whatJsonCannotHoldIsRefused() {
    assertThatThrownBy(() -> JsonFingerprints.canonicalJson(Double.NaN))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> JsonFingerprints.canonicalJson(Map.of(1, 2)))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> JsonFingerprints.canonicalJson(new Object()))
        .isInstanceOf(IllegalArgumentException.class);
  }
}
