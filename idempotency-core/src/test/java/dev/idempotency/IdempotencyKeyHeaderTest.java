package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class IdempotencyKeyHeaderTest {

  @Test
  void parsesStructuredFieldStringsWithEscapesAndParameters() {
    assertThat(IdempotencyKeyHeader.parse("\"8e03978e-40d5-43e8-bc93-6894a57f9324\""))
        .isEqualTo("8e03978e-40d5-43e8-bc93-6894a57f9324");
    assertThat(IdempotencyKeyHeader.parse("\"a\\\"b\\\\c\"")).isEqualTo("a\"b\\c");
    assertThat(IdempotencyKeyHeader.parse(" \"abc\";expires=60 ")).isEqualTo("abc");
    assertThat(IdempotencyKeyHeader.parse("abc-123")).isEqualTo("abc-123");
  }

  @Test
  void refusesMalformedValues() {
    for (String bad :
        new String[] {"\"abc", "\"a\\xb\"", "\"abc\" junk", "\"\"", "a b", "\"\u00e9\"", ""}) {
      assertThatThrownBy(() -> IdempotencyKeyHeader.parse(bad))
          .as(bad)
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("Idempotency-Key");
    }
    assertThatThrownBy(() -> IdempotencyKeyHeader.parse(null)).hasMessageContaining("missing");
  }

  @Test
  void aListOfKeysIsRefusedAsOne() {
    assertThatThrownBy(() -> IdempotencyKeyHeader.parse("\"a1\", \"b2\""))
        .hasMessageContaining("one key, not a list");
    assertThatThrownBy(() -> IdempotencyKeyHeader.parse("a1, b2"))
        .hasMessageContaining("one key, not a list");
  }

  @Test
  void aKeyOverTheGivenLimitIsTooLongHoweverFarOver() {
    assertThat(IdempotencyKeyHeader.parse("Idempotency-Key", "k".repeat(1_000), 1_000))
        .hasSize(1_000);
    for (int length : new int[] {1_001, 1_024, 1_025, 5_000}) {
      assertThatThrownBy(
              () -> IdempotencyKeyHeader.parse("Idempotency-Key", "k".repeat(length), 1_000))
          .isInstanceOfSatisfying(
              IdempotencyKeyHeader.TooLongException.class,
              e -> assertThat(e.maxLength()).isEqualTo(1_000))
          .hasMessageContaining("at most 1000 characters");
    }
  }
}
