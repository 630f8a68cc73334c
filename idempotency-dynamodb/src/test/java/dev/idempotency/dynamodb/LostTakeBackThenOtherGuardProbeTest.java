package dev.idempotency.dynamodb;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.IdempotencyEvent;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.KeyStoreException;
import dev.idempotency.testservers.Dynalite;
import dev.idempotency.testservers.Poll;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;

/**
 * probeB, suspicion 1 (SPEC 1), guard against guard on one dynalite table: guard A's claim lands
 * but every reply to it is lost (the SDK's retries too), so A's caller gets {@code
 * KeyStoreException} and A takes the claim back in the background ({@code UnsentClaims}); every
 * reply to that take-back's {@code DeleteItem} is lost as well (the delete landed, the client gave
 * up), so A goes on with its fenced follow-ups over one lease. Meanwhile guard B (its own client,
 * no losses) claims the key as soon as it is free and sends slowly (1.5 leases, renewing), so that
 * A's follow-up take-backs run while B holds the key.
 *
 * <p>Observed on probeB (1157db4): passes. B claims afresh (attempt 1) once A's delete landed, A's
 * follow-ups find B's token and change nothing (the fence), B's outcome is recorded, and a repeat
 * on A replays B's result: one send, no key stuck. Refuted. Regular test, about 10 s.
 */
class LostTakeBackThenOtherGuardProbeTest extends LostReplyStore {

  private static final Duration TTL = Duration.ofHours(1);
  private static final Duration LEASE = Duration.ofSeconds(2);

  @Override
  String tableName() {
    return "idempotency-lost-takeback-guards";
  }

  @Test
  void aTakeBackWhoseRepliesAreLostNeverDisturbsTheNextOwner() throws Exception {
    DynamoDbClient plain = DynaliteClients.client(Dynalite.shared().endpoint());
    DynamoDbKeyStore storeB =
        DynamoDbKeyStore.builder(plain)
            .tableName(tableName())
            .operationTimeout(DynamoDbKeyStoreTest.TEST_OPERATION_TIMEOUT)
            .attemptTimeout(DynamoDbKeyStoreTest.TEST_OPERATION_TIMEOUT)
            .createTableIfMissing(true)
            .build();
    DynamoDbKeyStore storeA = // on the client that loses replies; gives up sooner
        DynamoDbKeyStore.builder(client)
            .tableName(tableName())
            .operationTimeout(Duration.ofSeconds(3))
            .attemptTimeout(Duration.ofSeconds(2))
            .build();
    List<IdempotencyEvent> eventsB = new CopyOnWriteArrayList<>();
    String key = "lost-takeback-guards:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    try (IdempotencyGuard guardA =
            IdempotencyGuard.builder()
                .store(storeA)
                .lease(LEASE)
                .inFlightWait(Duration.ZERO)
                .build();
        IdempotencyGuard guardB =
            IdempotencyGuard.builder()
                .store(storeB)
                .lease(LEASE)
                .inFlightWait(Duration.ZERO)
                .listener(eventsB::add)
                .build()) {
      http.loseNextReplies("PutItem", 1_000); // A's claim: landed, never answered
      http.loseNextReplies("DeleteItem", 1_000); // A's take-backs: landed, never answered
      assertThatThrownBy(() -> guardA.execute(key, TTL, ctx -> "a-" + sends.incrementAndGet()))
          .isInstanceOf(KeyStoreException.class);
      assertThat(http.lost()).as("A's claim reached dynalite").isPositive();
      // A's store keeps losing every PutItem and DeleteItem reply from here on: its follow-up
      // take-backs (GetItem, then DeleteItem only while the item is A's) run while B holds the key

      String b =
          Poll.within(Duration.ofSeconds(60))
              .every(Duration.ofMillis(50))
              .ignoring(IdempotencyInProgressException.class)
              .until(
                  "B claims the key once A's lost claim is taken back, and sends",
                  () ->
                      guardB.execute(
                          key,
                          TTL,
                          ctx -> {
                            int n = sends.incrementAndGet();
                            Thread.sleep(LEASE.toMillis() * 3 / 2); // A's follow-ups run now
                            return "b-" + n + "-attempt-" + ctx.attempt();
                          }),
                  result -> true);
      String replayOnA =
          Poll.within(Duration.ofSeconds(30))
              .every(Duration.ofMillis(100))
              .ignoring(KeyStoreException.class)
              .ignoring(IdempotencyInProgressException.class)
              .until(
                  "a repeat on B's store",
                  () -> guardB.execute(key, TTL, ctx -> "again-" + sends.incrementAndGet()),
                  result -> true);

      List<IdempotencyEvent.Type> typesB = eventsB.stream().map(IdempotencyEvent::type).toList();
      String what = "B got " + b + ", the repeat " + replayOnA + ", B's events " + typesB;
      assertThat(sends).as(what).hasValue(1);
      assertThat(b).as(what).isEqualTo("b-1-attempt-1");
      assertThat(replayOnA).as(what).isEqualTo(b);
      assertThat(typesB).as(what).contains(IdempotencyEvent.Type.COMPLETED);
      assertThat(http.sent("DeleteItem")).as("A's take-back deleted (%s)", what).isPositive();
    } finally {
      storeA.close();
      storeB.close();
      plain.close();
    }
  }
}
