package dev.idempotency.spring.suite;

import static dev.idempotency.spring.suite.Stack.PROVIDER;
import static dev.idempotency.spring.suite.Stack.STORE;

import java.util.List;
import org.junit.jupiter.api.AfterEach;

/**
 * What every hazard test of the suite shares: the entry points it runs over, and putting the shared
 * store and provider back as they were after each case.
 *
 * <p>SPEC 16's hazards that are not (yet) a class of this suite, and where they are tested: a
 * rollback of the surrounding transaction ({@code TransactionalIdempotentTest}, the joined-mode
 * {@code JoinedTransactionContract}, the Kafka and JMS transaction tests); a store down when the
 * application starts ({@code operations.StartWithoutStoreTest}); a name that is not safe (default
 * names shared by two methods: {@code IdempotentMethodStartupTest}, {@code
 * IdempotentListenerStartupTest}).
 *
 * <p>Listeners ({@link ListenerEntryPoint}: the broker is the caller) run the hazards that apply to
 * them: a store down at the delivery, and in the middle of a send ({@code StoreDownHazardTest}), a
 * key that is not safe (the poison-message path, {@code UnsafeKeyHazardTest}), a shutdown mid-send
 * ({@code ShutdownHazardTest}), an interrupted thread ({@code InterruptedThreadHazardTest}, on an
 * application of the test's own), a lease that lapses before the send ({@code
 * LeaseLapseHazardTest}: a delivery's claim answered after another consumer took the lapsed key
 * over, on every listener; and on the Kafka batch listener a later message of a batch whose lease
 * lapsed, its renewals refused, while an earlier message's send ran). Not run on listeners, and
 * why:
 *
 * <ul>
 *   <li>the caller gives up: a broker does not give up on a delivery; its equivalent, a redelivery
 *       while the first delivery's send runs, cannot reach the listener's own consumer, which
 *       handles one delivery of a partition or queue at a time; the same key in flight on another
 *       consumer is {@code
 *       ListenerContract#aDeliveryInFlightElsewhereComesBackWithBackoffAndIsNeverDeadLettered};
 *   <li>a lease that lapses during a send that already began (its renewals failing for a whole
 *       lease while the provider call runs), on a listener or any entry point: another consumer may
 *       then take the key over and send again, the stalled owner's rare duplicate SPEC 5 allows,
 *       which nothing can take back once the first send began.
 * </ul>
 */
abstract class HazardTest {

  /** The entry points of the suite, for {@code @MethodSource}. */
  static List<EntryPoint> entryPoints() {
    return EntryPoint.all();
  }

  /** The listener entry points of the suite, for {@code @MethodSource}. */
  static List<ListenerEntryPoint> listenerEntryPoints() {
    return ListenerEntryPoint.all();
  }

  @AfterEach
  void restoreTheStoreAndTheProvider() {
    PROVIDER.reset();
    STORE.down.set(false);
    STORE.renewalsDown.set(false);
    STORE.heldClaimAnswer.set(null);
  }
}
