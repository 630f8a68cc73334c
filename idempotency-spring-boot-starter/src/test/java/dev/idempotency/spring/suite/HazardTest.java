package dev.idempotency.spring.suite;

import static dev.idempotency.spring.suite.Stack.PROVIDER;
import static dev.idempotency.spring.suite.Stack.STORE;

import java.util.List;
import org.junit.jupiter.api.AfterEach;

/**
 * What every hazard test of the suite shares: the entry points it runs over, and putting the shared
 * store and provider back as they were after each case.
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
