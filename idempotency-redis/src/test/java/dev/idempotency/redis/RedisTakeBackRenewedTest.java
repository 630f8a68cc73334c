package dev.idempotency.redis;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.testservers.Poll;
import java.time.Duration;
import java.time.Instant;
import java.util.UUID;
import org.junit.jupiter.api.Test;

/**
 * Issue 37 (found by probeG), the store half of {@code TakeBackUndoneByRenewalTest} (core) on a
 * real Redis: a takeover taken back gets a fresh owner token (take-back.lua), so a renewal of the
 * taken-back claim that reaches Redis after the take-back is refused by extend.lua's fence and the
 * next claim takes it over as attempt 3. Before the fix the token was kept and the renewal gave the
 * record a live lease again.
 */
class RedisTakeBackRenewedTest {

  private static final Duration RETENTION = Duration.ofHours(1);

  @Test
  void aRenewalAfterTheTakeBackOfATakeoverDoesNotReviveIt() throws Exception {
    try (StandaloneRedis redis = StandaloneRedis.start();
        RedisKeyStore store = RedisKeyStore.builder(redis.client()).build()) {
      String keyId =
          (UUID.randomUUID().toString() + UUID.randomUUID()).replace("-", "").substring(0, 64);
      assertThat(store.claim(request(keyId, "t1", Duration.ofMillis(100), true)))
          .isEqualTo(new ClaimResult.Claimed(1, false));
      ClaimResult takeover =
          Poll.within(Duration.ofSeconds(30))
              .every(Duration.ofMillis(50))
              .until(
                  "the first lease lapsed on Redis's clock",
                  () -> store.claim(request(keyId, "t2", Duration.ofMinutes(30), true)),
                  result -> result instanceof ClaimResult.Claimed);
      assertThat(takeover).isEqualTo(new ClaimResult.Claimed(2, true));
      assertThat(store.takeBack(keyId, "t2", Instant.now())).isTrue();
      ClaimResult strict = store.claim(request(keyId, "strict", Duration.ofMinutes(30), false));
      assertThat(strict).isInstanceOf(ClaimResult.Existing.class);
      assertThat(((ClaimResult.Existing) strict).leaseExpired()).as("taken back").isTrue();

      boolean renewed =
          store.extend(new ExtendRequest(keyId, "t2", Duration.ofMinutes(30), Instant.now()));
      ClaimResult next = store.claim(request(keyId, "t3", Duration.ofMinutes(30), true));

      assertThat(next)
          .as("the next claim after the take-back and a late renewal (renewed: %s)", renewed)
          .isEqualTo(new ClaimResult.Claimed(3, true));
    }
  }

  private static ClaimRequest request(
      String keyId, String token, Duration lease, boolean takeOver) {
    return new ClaimRequest(keyId, token, "", Instant.now(), lease, RETENTION, takeOver, null);
  }
}
