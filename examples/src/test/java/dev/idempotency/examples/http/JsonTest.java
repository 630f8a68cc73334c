package dev.idempotency.examples.http;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class JsonTest {

  @Test
  void canonicalJsonIgnoresKeyOrderAndWhitespace() {
    assertThat(Json.canonical(Json.parse("{ \"b\": [1, 2.50, true], \"a\": null }")))
        .isEqualTo("{\"a\":null,\"b\":[1,2.50,true]}");
    assertThat(Json.canonical(Json.parse("{\"s\":\"x\\\"\\u0041\"}")))
        .isEqualTo("{\"s\":\"x\\\"A\"}");
    assertThatThrownBy(() -> Json.parse("{\"a\":1,\"a\":2}")).hasMessageContaining("duplicate key");
    assertThatThrownBy(() -> Json.parse("[1,]")).isInstanceOf(IllegalArgumentException.class);
  }
}
