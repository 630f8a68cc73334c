package dev.idempotency.spring;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JavaType;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.ObjectReader;
import dev.idempotency.ResultCodec;
import java.io.IOException;
import java.lang.reflect.Type;
import java.util.Objects;

/** {@link JsonCodecs} on a Jackson 2 {@link ObjectMapper}, the one Spring Boot 3.5 configures. */
public final class Jackson2JsonCodecs implements JsonCodecs {

  private final ObjectMapper mapper;
  private final ObjectReader exactTrees;

  /**
   * Uses a mapper as it is configured (modules, naming, dates).
   *
   * @param mapper the application's mapper
   */
  public Jackson2JsonCodecs(ObjectMapper mapper) {
    this.mapper = Objects.requireNonNull(mapper, "mapper must not be null");
    this.exactTrees =
        mapper
            .readerFor(Object.class)
            .with(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
            .with(DeserializationFeature.USE_BIG_INTEGER_FOR_INTS)
            // a body of two JSON values, which WebFlux decodes into a Flux of both, is not one
            // value: it must not be fingerprinted by its first (it then counts by its bytes)
            .with(DeserializationFeature.FAIL_ON_TRAILING_TOKENS);
  }

  @Override
  public <T> ResultCodec<T> codecFor(Type type) {
    JavaType javaType = mapper.getTypeFactory().constructType(type);
    return new ResultCodec<>() {
      @Override
      public byte[] encode(T value) throws Exception {
        return mapper.writerFor(javaType).writeValueAsBytes(value);
      }

      @Override
      public T decode(byte[] bytes) throws Exception {
        return mapper.readValue(bytes, javaType);
      }
    };
  }

  @Override
  public Object readTree(byte[] json) throws IOException {
    return exactTrees.readValue(json);
  }
}
