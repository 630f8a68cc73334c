package dev.idempotency.spring;

import java.io.IOException;

/**
 * The application mappers the fingerprint tests read JSON with: as built, with read features that
 * change what parses, and with settings under which the tree reads something else.
 */
public final class TestMappers {

  private TestMappers() {}

  /** Jackson 3 mappers (Boot 4); build them only where Jackson 3 works. */
  public static final class Jackson3 {
    public static JsonCodecs plain() {
      return new dev.idempotency.spring.Jackson3JsonCodecs(
          tools.jackson.databind.json.JsonMapper.builder().build());
    }

    public static JsonCodecs lenient() {
      return new dev.idempotency.spring.Jackson3JsonCodecs(
          tools.jackson.databind.json.JsonMapper.builder()
              .enable(tools.jackson.core.json.JsonReadFeature.ALLOW_JAVA_COMMENTS)
              .enable(tools.jackson.core.json.JsonReadFeature.ALLOW_SINGLE_QUOTES)
              .enable(tools.jackson.core.json.JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS)
              .enable(tools.jackson.core.json.JsonReadFeature.ALLOW_TRAILING_COMMA)
              .build());
    }

    public static JsonCodecs strictDuplicates() {
      return new dev.idempotency.spring.Jackson3JsonCodecs(
          tools.jackson.databind.json.JsonMapper.builder()
              .enable(tools.jackson.core.StreamReadFeature.STRICT_DUPLICATE_DETECTION)
              .build());
    }

    public static JsonCodecs javaArrays() {
      return new dev.idempotency.spring.Jackson3JsonCodecs(
          tools.jackson.databind.json.JsonMapper.builder()
              .enable(tools.jackson.databind.DeserializationFeature.USE_JAVA_ARRAY_FOR_JSON_ARRAY)
              .build());
    }

    public static JsonCodecs trimmedStrings() {
      tools.jackson.databind.module.SimpleModule trim =
          new tools.jackson.databind.module.SimpleModule();
      trim.addDeserializer(
          String.class,
          new tools.jackson.databind.ValueDeserializer<String>() {
            @Override
            public String deserialize(
                tools.jackson.core.JsonParser p, tools.jackson.databind.DeserializationContext c) {
              return p.getString().trim();
            }
          });
      return new dev.idempotency.spring.Jackson3JsonCodecs(
          tools.jackson.databind.json.JsonMapper.builder().addModule(trim).build());
    }
  }

  /** Jackson 2 mappers (Boot 3.5); build them only where Jackson 2 works. */
  public static final class Jackson2 {
    public static JsonCodecs plain() {
      return new dev.idempotency.spring.Jackson2JsonCodecs(
          new com.fasterxml.jackson.databind.ObjectMapper());
    }

    public static JsonCodecs lenient() {
      return new dev.idempotency.spring.Jackson2JsonCodecs(
          com.fasterxml.jackson.databind.json.JsonMapper.builder()
              .enable(com.fasterxml.jackson.core.json.JsonReadFeature.ALLOW_JAVA_COMMENTS)
              .enable(com.fasterxml.jackson.core.json.JsonReadFeature.ALLOW_SINGLE_QUOTES)
              .enable(com.fasterxml.jackson.core.json.JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS)
              .enable(com.fasterxml.jackson.core.json.JsonReadFeature.ALLOW_TRAILING_COMMA)
              .build());
    }

    public static JsonCodecs strictDuplicates() {
      return new dev.idempotency.spring.Jackson2JsonCodecs(
          com.fasterxml.jackson.databind.json.JsonMapper.builder()
              .enable(com.fasterxml.jackson.core.StreamReadFeature.STRICT_DUPLICATE_DETECTION)
              .build());
    }

    public static JsonCodecs javaArrays() {
      return new dev.idempotency.spring.Jackson2JsonCodecs(
          com.fasterxml.jackson.databind.json.JsonMapper.builder()
              .enable(
                  com.fasterxml.jackson.databind.DeserializationFeature
                      .USE_JAVA_ARRAY_FOR_JSON_ARRAY)
              .build());
    }

    public static JsonCodecs trimmedStrings() {
      com.fasterxml.jackson.databind.module.SimpleModule trim =
          new com.fasterxml.jackson.databind.module.SimpleModule();
      trim.addDeserializer(
          String.class,
          new com.fasterxml.jackson.databind.JsonDeserializer<String>() {
            @Override
            public String deserialize(
                com.fasterxml.jackson.core.JsonParser p,
                com.fasterxml.jackson.databind.DeserializationContext c)
                throws IOException {
              return p.getText().trim();
            }
          });
      return new dev.idempotency.spring.Jackson2JsonCodecs(
          com.fasterxml.jackson.databind.json.JsonMapper.builder().addModule(trim).build());
    }
  }
}
