package dev.idempotency.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.Batch;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.ResultCodec;
import dev.idempotency.UnreadableRecordException;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.RecordState;
import io.lettuce.core.SetArgs;
import io.lettuce.core.api.sync.RedisHashCommands;
import io.lettuce.core.api.sync.RedisKeyCommands;
import io.lettuce.core.api.sync.RedisStringCommands;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Issues 37 and 39 (SPEC 1, 14): a key whose value the store cannot read because the scripts cannot
 * (a key of another Redis type, WRONGTYPE; or a record's head, owner token included, with a broken
 * tail) is that key's error alone. Before, such a value made the Lua script fail, and so a whole
 * batch (claims, completions, renewals) as a store error: the healthy keys' outcomes were not
 * written, and a single claim of it opened the guard's breaker. Run on standalone Redis ({@link
 * RedisUnreadableBatchTest}, one script call per batch) and on a cluster ({@link
 * RedisClusterKeyStoreTest}, a pipeline of single-key scripts per batch).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
abstract class RedisUnreadableBatchCases<
    C extends
        RedisStringCommands<String, String> & RedisKeyCommands<String, String>
            & RedisHashCommands<String, String>> {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofMinutes(5);

  /** How a record is damaged. */
  enum Damage {
    ANOTHER_REDIS_TYPE,
    BROKEN_TAIL
  }

  /** The store under test. */
  abstract RedisKeyStore store();

  /** A new store of the same client with its own key prefix. */
  abstract RedisKeyStore newStore(String keyPrefix);

  /** Commands on the server (or cluster) under the store(). */
  abstract C admin();

  @ParameterizedTest
  @EnumSource(Damage.class)
  void aBatchCompletionWritesTheOtherKeysWhenOneRecordCannotBeRead(Damage damage) {
    List<ClaimRequest> claims = claimThree();
    damage(store().redisKey(claims.get(1).keyId()), damage);

    List<Boolean> written = store().completeAll(claims.stream().map(this::completion).toList());

    assertThat(written).containsExactly(true, false, true);
    assertThat(state(claims.get(0))).isEqualTo(RecordState.COMPLETED);
    assertThat(state(claims.get(2))).isEqualTo(RecordState.COMPLETED);
    assertThat(store().complete(completion(claims.get(1))))
        .as("a single completion of the unreadable key, as a cluster's batch makes it")
        .isFalse();
  }

  @ParameterizedTest
  @EnumSource(Damage.class)
  void aBatchRenewalRenewsTheOtherKeysWhenOneRecordCannotBeRead(Damage damage) {
    List<ClaimRequest> claims = claimThree();
    damage(store().redisKey(claims.get(1).keyId()), damage);

    List<Boolean> renewed = store().extendAll(claims.stream().map(this::renewal).toList());

    assertThat(renewed).containsExactly(true, false, true);
    assertThat(store().extend(renewal(claims.get(1)))).isFalse();
    assertThat(store().release(claims.get(1).keyId(), claims.get(1).ownerToken()))
        .as("its owner's release deletes a broken record whose head and token are its own")
        .isEqualTo(damage == Damage.BROKEN_TAIL);
  }

  @ParameterizedTest
  @EnumSource(Damage.class)
  void aClaimOfAnUnreadableKeyFailsThatKeyAloneWithUnreadableRecordException(Damage damage)
      throws Exception {
    ClaimRequest damaged = claimRequest();
    assertThat(store().claim(damaged)).isInstanceOf(ClaimResult.Claimed.class);
    damage(store().redisKey(damaged.keyId()), damage);
    ClaimRequest again = claimRequest(damaged.keyId());

    List<ClaimResult> batch = store().claimAll(List.of(claimRequest(), again, claimRequest()));

    assertThat(batch.get(0)).isInstanceOf(ClaimResult.Claimed.class);
    assertThat(batch.get(1)).isInstanceOf(ClaimResult.Failed.class);
    assertThat(((ClaimResult.Failed) batch.get(1)).error())
        .isInstanceOf(UnreadableRecordException.class);
    assertThat(batch.get(2)).isInstanceOf(ClaimResult.Claimed.class);
    assertThatThrownBy(() -> store().claim(again)).isInstanceOf(UnreadableRecordException.class);
    assertThatThrownBy(
            () -> store().claimAsync(again).toCompletableFuture().get(60, TimeUnit.SECONDS))
        .hasCauseInstanceOf(UnreadableRecordException.class);
    assertThatThrownBy(() -> store().find(damaged.keyId(), Instant.now()))
        .isInstanceOf(UnreadableRecordException.class);
    boolean settledOrOtherType = damage == Damage.ANOTHER_REDIS_TYPE;
    assertThat(store().delete(damaged.keyId(), Instant.now()))
        .as("an operator deletes it unless it looks in progress")
        .isEqualTo(settledOrOtherType);
    if (settledOrOtherType) {
      assertThat(store().claim(again))
          .as("claimed afresh once deleted")
          .isInstanceOf(ClaimResult.Claimed.class);
    } else {
      assertThatThrownBy(() -> store().claim(again)).isInstanceOf(UnreadableRecordException.class);
    }
  }

  @ParameterizedTest
  @EnumSource(Damage.class)
  void aBatchsRecordingWritesTheHealthyOutcomesBesideAnUnreadableRecord(Damage damage) {
    String prefix = "unreadable-recording-" + UUID.randomUUID() + ":";
    try (RedisKeyStore own = newStore(prefix);
        IdempotencyGuard guard =
            IdempotencyGuard.builder().store(own).lease(LEASE).storeRawKeys(true).build()) {
      String damaged = "order:" + UUID.randomUUID();
      List<String> healthy = List.of("order:" + UUID.randomUUID(), "order:" + UUID.randomUUID());
      List<String> keys = List.of(healthy.get(0), damaged, healthy.get(1));
      Batch.Recorded recorded;
      try (Batch<String> batch =
          guard.claimBatch(
              keys.stream().map(key -> IdempotencyRequest.of(key, TTL)).toList(),
              ResultCodec.string())) {
        assertThat(batch.claimedKeys()).containsExactlyInAnyOrderElementsOf(keys);
        damage(redisKeyOf(prefix, damaged), damage);
        for (Batch.Item item : batch.toSend()) {
          batch.succeeded(item, "sent " + item.key());
        }
        recorded = batch.record();
      }

      assertThat(recorded.notRecorded()).containsExactly(damaged);
      AtomicInteger sendsAgain = new AtomicInteger();
      for (String key : healthy) {
        assertThat(guard.execute(key, TTL, ctx -> "again " + sendsAgain.incrementAndGet()))
            .isEqualTo("sent " + key);
      }
      assertThat(sendsAgain).as("healthy keys replayed, not sent again").hasValue(0);
    }
  }

  List<ClaimRequest> claimThree() {
    List<ClaimRequest> claims = List.of(claimRequest(), claimRequest(), claimRequest());
    assertThat(store().claimAll(claims)).allMatch(ClaimResult.Claimed.class::isInstance);
    return claims;
  }

  ClaimRequest claimRequest() {
    return claimRequest(UUID.randomUUID().toString().replace("-", ""));
  }

  private static ClaimRequest claimRequest(String keyId) {
    return new ClaimRequest(
        keyId, UUID.randomUUID().toString(), "", Instant.now(), LEASE, TTL, true, null);
  }

  CompleteRequest completion(ClaimRequest claim) {
    return new CompleteRequest(
        claim.keyId(),
        claim.ownerToken(),
        RecordState.COMPLETED,
        "sent".getBytes(StandardCharsets.UTF_8),
        Instant.now());
  }

  private ExtendRequest renewal(ClaimRequest claim) {
    return new ExtendRequest(claim.keyId(), claim.ownerToken(), LEASE, Instant.now());
  }

  private RecordState state(ClaimRequest claim) {
    return store().find(claim.keyId(), Instant.now()).orElseThrow().state();
  }

  /** The Redis key of a guard's key, found by the raw key its record keeps. */
  private String redisKeyOf(String prefix, String key) {
    for (String redisKey : admin().keys(prefix + "*")) {
      byte[] value = admin().get(redisKey).getBytes(StandardCharsets.UTF_8);
      if (RecordValue.parse(value).rawKey().equals(key)) {
        return redisKey;
      }
    }
    throw new AssertionError("no record of the key under " + prefix);
  }

  /**
   * Damages a record: a hash in its place (WRONGTYPE for every string command), or its in-progress
   * head and owner token kept with a tail the scripts cannot parse.
   */
  private void damage(String redisKey, Damage damage) {
    String value = admin().get(redisKey);
    assertThat(value).as("a record to damage").isNotNull();
    if (damage == Damage.ANOTHER_REDIS_TYPE) {
      admin().del(redisKey);
      admin().hset(redisKey, "field", "value");
      admin().pexpire(redisKey, TTL.toMillis());
    } else {
      String owner = RecordValue.parse(value.getBytes(StandardCharsets.UTF_8)).ownerToken();
      admin()
          .set(
              redisKey, "I" + owner.length() + ":" + owner + "5:broken", SetArgs.Builder.keepttl());
    }
  }
}
