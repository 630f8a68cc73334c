package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.idempotency.inmemory.InMemoryKeyStore;
import java.io.IOException;
import java.time.Duration;
import org.junit.jupiter.api.Test;

class ExceptionsTest {

  private final IdempotencyGuard guard =
      IdempotencyGuard.builder().store(InMemoryKeyStore.builder().build()).build();

  @Test
  void aCatchOfIdempotencyExceptionNeverCatchesAFailedSend() {
    Throwable checked =
        catchThrowable(
            () -> {
              try {
                guard.execute(
                    "exceptions:checked",
                    Duration.ofMinutes(5),
                    ctx -> {
                      throw new IOException("provider down");
                    });
              } catch (IdempotencyException guardsOwn) {
                throw new AssertionError("caught as the guard's own: " + guardsOwn);
              }
            });
    Throwable unchecked =
        catchThrowable(
            () -> {
              try {
                guard.execute(
                    "exceptions:unchecked",
                    Duration.ofMinutes(5),
                    ctx -> {
                      throw new IllegalStateException("provider said no");
                    });
              } catch (IdempotencyException guardsOwn) {
                throw new AssertionError("caught as the guard's own: " + guardsOwn);
              }
            });

    assertThat(checked)
        .isInstanceOf(SendFailedException.class)
        .isNotInstanceOf(IdempotencyException.class)
        .hasCauseInstanceOf(IOException.class);
    assertThat(unchecked).isExactlyInstanceOf(IllegalStateException.class);
  }

  @Test
  void everyConditionHasAPublicWayToBuildItForTestsOfTheCallersMapping() {
    String digest = "digest-of-a-key";

    IdempotencyException[] conditions = {
      IdempotencyInProgressException.afterWaiting(digest, Duration.ofSeconds(2), null),
      new IdempotencyKeyReuseException(digest),
      new IdempotencyOutcomeUnknownException(digest, 2),
      new IdempotencyResultUnavailableException(digest, "the codec changed", null),
      new IdempotencyStoredFailureException(digest, "com.example.InvalidNumber", "bad number"),
      new KeyStoreException("the store is down", null)
    };

    assertThat(conditions).allSatisfy(e -> assertThat(e).hasMessageContaining(" "));
    assertThat(((IdempotencyInProgressException) conditions[0]).waited())
        .isEqualTo(Duration.ofSeconds(2));
    assertThat(((IdempotencyInProgressException) conditions[0]).keyDigest()).isEqualTo(digest);
    assertThat(((IdempotencyKeyReuseException) conditions[1]).keyDigest()).isEqualTo(digest);
    assertThat(((IdempotencyOutcomeUnknownException) conditions[2]).attempt()).isEqualTo(2);
    assertThat(((IdempotencyStoredFailureException) conditions[4]).failureType())
        .isEqualTo("com.example.InvalidNumber");
    assertThat(new SendFailedException(digest, new IOException("x")))
        .hasCauseInstanceOf(IOException.class)
        .hasMessageContaining(digest);
  }
}
