package dev.idempotency.examples.http;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class JsonTest {

  @Test
  void canonicalJsonIgnoresKeyOrderAndWhitespace() {
    assertThat(Json.canonical(Json.parse("{ \"b\": [1, 2.50, true], \"a\": null }")))
        .isEqualTo("{\"a\":null,\"b\":[1,2.5,true]}");
    assertThat(Json.canonical(Json.parse("{\"s\":\"x\\\"\\u0041\"}")))
        .isEqualTo("{\"s\":\"x\\\"A\"}");
  }

  @Test
  void oneNumberWrittenTwoWaysHasOneFingerprint() {
    String plain = Json.fingerprint(Json.parse("{\"n\":100,\"m\":0.5}"));

    assertThat(Json.fingerprint(Json.parse("{\"m\":5e-1, \"n\":1e2}"))).isEqualTo(plain);
    assertThat(Json.fingerprint(Json.parse("{\"n\":100.0,\"m\":0.50}"))).isEqualTo(plain);
    assertThat(Json.fingerprint(Json.parse("{\"n\":101,\"m\":0.5}"))).isNotEqualTo(plain);
  }

  @Test
  void duplicateKeysAndTrailingGarbageAreRefused() {
    assertThatThrownBy(() -> Json.parse("{\"a\":1,\"a\":2}"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("Duplicate field 'a'");
    assertThatThrownBy(() -> Json.parse("[1,]")).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> Json.parse("{} {}")).isInstanceOf(IllegalArgumentException.class);
  }
}
