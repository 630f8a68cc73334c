package dev.idempotency.spring;

import dev.idempotency.ResultCodec;
import java.io.IOException;
import java.lang.reflect.Type;
import java.util.Objects;
import tools.jackson.core.JacksonException;
import tools.jackson.core.JsonParser;
import tools.jackson.core.JsonToken;
import tools.jackson.databind.DeserializationFeature;
import tools.jackson.databind.JavaType;
import tools.jackson.databind.ObjectMapper;
import tools.jackson.databind.ObjectReader;

/** {@link JsonCodecs} on a Jackson 3 {@link ObjectMapper}, the one Spring Boot 4 configures. */
public final class Jackson3JsonCodecs implements JsonCodecs {

  private final ObjectMapper mapper;
  private final ObjectReader exactTrees;

  /** Whether {@link #fingerprint} may stream: it agrees with the tree on this mapper. */
  private final boolean streams;

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
    this.streams =
        StreamedFingerprintCheck.agree(json -> JsonFingerprints.of(readTree(json)), this::streamed);
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

  /**
   * The fingerprint {@link JsonCodecs#fingerprint} defines, from the parser's tokens instead of a
   * tree (the parser the tree would be read with, so the mapper's read features apply alike).
   */
  @Override
  public String fingerprint(byte[] json) throws IOException {
    return streams ? streamed(json) : JsonFingerprints.of(readTree(json));
  }

  /** Whether {@link #fingerprint} streams on this mapper (the probes agreed); for tests. */
  boolean streams() {
    return streams;
  }

  private String streamed(byte[] json) throws IOException {
    try (JsonParser parser = exactTrees.createParser(json)) {
      CanonicalJsonWriter out = new CanonicalJsonWriter(json.length);
      JsonToken token = parser.nextToken();
      if (token == null) {
        throw new IOException("no JSON value: the body is only white space");
      }
      do {
        switch (token) {
          case START_OBJECT -> out.startObject();
          case END_OBJECT -> out.endObject();
          case START_ARRAY -> out.startArray();
          case END_ARRAY -> out.endArray();
          case PROPERTY_NAME -> out.name(parser.currentName());
          case VALUE_STRING -> {
            if (parser.getStringLength() > parser.streamReadConstraints().getMaxStringLength()) {
              // the tree reads the text as a String, which checks the mapper's limit (the
              // characters alone do not): fail alike, so that the body's fingerprint is the same
              out.string(parser.getString());
            } else {
              out.string(
                  parser.getStringCharacters(), parser.getStringOffset(), parser.getStringLength());
            }
          }
          case VALUE_NUMBER_INT -> {
            if (parser.getNumberType() == JsonParser.NumberType.BIG_INTEGER) {
              out.number(parser.getBigIntegerValue());
            } else {
              out.number(parser.getLongValue());
            }
          }
          case VALUE_NUMBER_FLOAT -> {
            if (parser.isNaN()) {
              throw new IllegalArgumentException("JSON has no number " + parser.getString());
            }
            out.number(parser.getDecimalValue());
          }
          case VALUE_TRUE -> out.bool(true);
          case VALUE_FALSE -> out.bool(false);
          case VALUE_NULL -> out.nullValue();
          default -> throw new IOException("not a JSON token: " + token);
        }
      } while (out.depth() > 0 && (token = parser.nextToken()) != null);
      if (out.depth() > 0 || parser.nextToken() != null) {
        throw new IOException("not one JSON value");
      }
      return out.fingerprint();
    } catch (JacksonException e) {
      throw new IOException("not JSON: " + e.getOriginalMessage(), e);
    }
  }
}
