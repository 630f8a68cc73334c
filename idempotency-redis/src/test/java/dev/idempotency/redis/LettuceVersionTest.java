package dev.idempotency.redis;

import static org.assertj.core.api.Assertions.assertThat;

import io.lettuce.core.RedisClient;
import org.junit.jupiter.api.Test;

/**
 * Which Lettuce the tests of this run use: the build runs the standalone contract on Lettuce 7 and
 * again on the 6.x versions Spring Boot 3.5 and 4.0 manage, and this proves each run has the jar it
 * claims (not a silently shadowed one).
 */
class LettuceVersionTest {

  @Test
  void theRunUsesTheLettuceItNames() {
    String expected = System.getProperty("expected.lettuce.version");
    String actual = RedisClient.class.getPackage().getImplementationVersion();
    String jar = RedisClient.class.getProtectionDomain().getCodeSource().getLocation().getPath();

    assertThat(expected).as("set by the build").isNotBlank();
    assertThat(jar)
        .as("the jar RedisClient comes from")
        .endsWith("lettuce-core-" + expected + ".jar");
    if (actual != null) {
      assertThat(actual).startsWith(expected);
    }
  }
}
