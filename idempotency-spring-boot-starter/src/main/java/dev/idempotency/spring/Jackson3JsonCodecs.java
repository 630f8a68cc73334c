package dev.idempotency.spring;

import dev.idempotency.ResultCodec;
import java.io.IOException;
import java.lang.reflect.Type;
import java.util.Objects;
import tools.jackson.core.JacksonException;
import tools.jackson.databind.DeserializationFeature;
import tools.jackson.databind.JavaType;
import tools.jackson.databind.ObjectMapper;
import tools.jackson.databind.ObjectReader;

/** {@link JsonCodecs} on a Jackson 3 {@link ObjectMapper}, the one Spring Boot 4 configures. */
public final class Jackson3JsonCodecs implements JsonCodecs {

  private final ObjectMapper mapper;
  private final ObjectReader exactTrees;

  /**
   * Uses a mapper as it is configured (modules, naming, dates).
   *
   * @param mapper the application's mapper
   */
  public Jackson3JsonCodecs(ObjectMapper mapper) {
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
      public byte[] encode(T value) {
        return mapper.writerFor(javaType).writeValueAsBytes(value);
      }

      @Override
      public T decode(byte[] bytes) {
        return mapper.readValue(bytes, javaType);
      }
    };
  }

  @Override
  public Object readTree(byte[] json) throws IOException {
    try {
      return exactTrees.readValue(json);
    } catch (JacksonException e) {
      throw new IOException("not JSON: " + e.getOriginalMessage(), e);
    }
  }
}
