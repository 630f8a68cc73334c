package dev.idempotency.inmemory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.github.benmanes.caffeine.cache.Ticker;
import dev.idempotency.IdempotencyEvent;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.GuardOnStoreContract;
import dev.idempotency.tck.KeyStoreContract;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;

class InMemoryKeyStoreTest extends KeyStoreContract {

  private final InMemoryKeyStore store = InMemoryKeyStore.builder().maximumSize(1_000_000).build();

  @Override
  protected KeyStore store() {
    return store;
  }

  @Nested
  class OnTheGuard extends GuardOnStoreContract {
    @Override
    protected KeyStore store() {
      return store;
    }
  }

  @Test
  void evictionForSizeBeforeTheWindowEndsIsCountedAndReported() {
    List<IdempotencyEvent> events = new CopyOnWriteArrayList<>();
    InMemoryKeyStore small =
        InMemoryKeyStore.builder().maximumSize(100).listener(events::add).build();

    for (int i = 0; i < 1_000; i++) {
      small.claim(claim(newKeyId(), newToken()));
    }

    assertThat(small.size()).isEqualTo(100);
    assertThat(small.evictionsBeforeExpiry()).isEqualTo(900);
    assertThat(events).hasSize(900);
    assertThat(events).allMatch(e -> e.type() == IdempotencyEvent.Type.EVICTED_BEFORE_EXPIRY);
  }

  @Test
  void recordsAreRemovedOnceTheirWindowHasPassedAndThatIsNotAnEarlyEviction() {
    AtomicLong nanos = new AtomicLong();
    Ticker ticker = nanos::get;
    InMemoryKeyStore expiring = InMemoryKeyStore.builder().ticker(ticker).build();
    for (int i = 0; i < 50; i++) {
      expiring.claim(claim(newKeyId(), newToken(), Duration.ofSeconds(30), Duration.ofMinutes(5)));
    }
    assertThat(expiring.size()).isEqualTo(50);

    nanos.addAndGet(Duration.ofMinutes(5).toNanos());

    assertThat(expiring.size()).isZero();
    assertThat(expiring.evictionsBeforeExpiry()).isZero();
  }

  @Test
  void payloadAboveTheLimitIsRefused() {
    InMemoryKeyStore limited = InMemoryKeyStore.builder().maxPayloadBytes(10).build();
    String keyId = newKeyId();
    String token = newToken();
    limited.claim(claim(keyId, token));

    assertThatThrownBy(() -> limited.complete(complete(keyId, token, new byte[11])))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("exceeds 10");
    assertThat(limited.maxPayloadBytes()).isEqualTo(10);
  }

  @Test
  void storedPayloadIsACopyTheCallerCannotChange() {
    String keyId = newKeyId();
    String token = newToken();
    byte[] payload = bytes("abc");
    store.claim(claim(keyId, token));
    store.complete(complete(keyId, token, payload));

    payload[0] = 'X';

    ClaimResult result = store.claim(claim(keyId, newToken()));
    assertThat(((ClaimResult.Existing) result).record().payload()).isEqualTo(bytes("abc"));
  }

  @Test
  void builderRejectsBadSettings() {
    assertThatThrownBy(() -> InMemoryKeyStore.builder().maximumSize(0))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("maximumSize");
    assertThatThrownBy(() -> InMemoryKeyStore.builder().maxPayloadBytes(0))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("maxPayloadBytes");
    assertThatThrownBy(() -> InMemoryKeyStore.builder().listener(null))
        .isInstanceOf(NullPointerException.class)
        .hasMessageContaining("listener");
  }

  @Test
  void claimRequestRejectsAKeyIdThatIsTooLong() {
    assertThatThrownBy(
            () ->
                new ClaimRequest(
                    "k".repeat(129),
                    "t",
                    "",
                    T0,
                    Duration.ofSeconds(1),
                    Duration.ofSeconds(2),
                    true,
                    null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("keyId");
  }
}
