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
 * them: a store down at the delivery ({@code StoreDownHazardTest}), a key that is not safe (the
 * poison-message path, {@code UnsafeKeyHazardTest}), a shutdown mid-send ({@code
 * ShutdownHazardTest}). Not run on listeners, and why:
 *
 * <ul>
 *   <li>a store down in the middle of a send: not yet (the HTTP case has no broker-specific part);
 *   <li>the caller gives up: a broker does not give up on a delivery; its equivalent, a redelivery
 *       while the first delivery's send runs, cannot reach the listener's own consumer, which
 *       handles one delivery of a partition or queue at a time; the same key in flight on another
 *       consumer is {@code ListenerContract#aDeliveryInFlightElsewhereComesBackWithBackoff...};
 *   <li>a lease lapsing before the send, and an interrupted thread: not yet on listeners (no
 *       listener case of either exists; the interrupt would land on the container's consumer
 *       thread, which needs an application of the test's own).
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
    STORE.heldClaimAnswer.set(null);
  }
}
