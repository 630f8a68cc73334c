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
 */
abstract class HazardTest {

  /** The entry points of the suite, for {@code @MethodSource}. */
  static List<EntryPoint> entryPoints() {
    return EntryPoint.all();
  }

  @AfterEach
  void restoreTheStoreAndTheProvider() {
    PROVIDER.reset();
    STORE.down.set(false);
    STORE.heldClaimAnswer.set(null);
  }
}
