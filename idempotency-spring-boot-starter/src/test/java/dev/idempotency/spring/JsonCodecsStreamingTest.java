package dev.idempotency.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.TestMappers.Jackson2;
import dev.idempotency.spring.TestMappers.Jackson3;
import org.junit.jupiter.api.Test;

/**
 * The starter's codecs stream the JSON fingerprint on a mapper that reads trees the standard way
 * (so {@code StreamingJsonFingerprintTest} compares the streamed fingerprint with the tree's, not
 * the tree's with itself), and keep the tree where the mapper reads it otherwise.
 */
class JsonCodecsStreamingTest {

  @Test
  void jackson3StreamsUnlessTheMapperReadsTreesItsOwnWay() {
    Jackson3JsonCodecs plain;
    try {
      plain = (Jackson3JsonCodecs) Jackson3.plain();
    } catch (LinkageError notOnThisClassPath) {
      return; // Boot 3.5: its Jackson 2 annotations are too old for Jackson 3
    }
    assertThat(plain.streams()).isTrue();
    assertThat(((Jackson3JsonCodecs) Jackson3.lenient()).streams()).isTrue();
    assertThat(((Jackson3JsonCodecs) Jackson3.strictDuplicates()).streams()).isTrue();
    assertThat(((Jackson3JsonCodecs) Jackson3.javaArrays()).streams()).isFalse();
    assertThat(((Jackson3JsonCodecs) Jackson3.trimmedStrings()).streams()).isFalse();
  }

  @Test
  void jackson2StreamsUnlessTheMapperReadsTreesItsOwnWay() {
    Jackson2JsonCodecs plain;
    try {
      plain = (Jackson2JsonCodecs) Jackson2.plain();
    } catch (LinkageError notOnThisClassPath) {
      return; // Boot 4 without Jackson 2
    }
    assertThat(plain.streams()).isTrue();
    assertThat(((Jackson2JsonCodecs) Jackson2.lenient()).streams()).isTrue();
    assertThat(((Jackson2JsonCodecs) Jackson2.strictDuplicates()).streams()).isTrue();
    assertThat(((Jackson2JsonCodecs) Jackson2.javaArrays()).streams()).isFalse();
    assertThat(((Jackson2JsonCodecs) Jackson2.trimmedStrings()).streams()).isFalse();
  }
}
