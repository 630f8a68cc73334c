package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/**
 * A sample test class for {@link BlockHoundUncheckedClassProbeTest} (not run by surefire: its name
 * does not end in Test): a class that runs after {@link BlockingSampleWithoutCheck} and checks no
 * blocking calls, as an MVC or listener test class.
 */
class SampleAfterIt {

  @Test
  void passes() {
    assertThat(1 + 1).isEqualTo(2);
  }
}
