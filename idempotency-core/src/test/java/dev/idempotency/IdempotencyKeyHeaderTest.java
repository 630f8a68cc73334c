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
}
