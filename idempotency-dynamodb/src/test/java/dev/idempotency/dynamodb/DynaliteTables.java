package dev.idempotency.dynamodb;

import dev.idempotency.KeyStoreException;
import dev.idempotency.testservers.Dynalite;
import dev.idempotency.testservers.Poll;
import java.time.Duration;
import java.time.Instant;

/** Stores on a table of the shared dynalite, created if missing, that answer before a test runs. */
final class DynaliteTables {

  private DynaliteTables() {}

  /**
   * A store on the named table of {@link Dynalite#shared()}, which it creates if missing, once the
   * table answers a lookup (within 60 s: dynalite creates a table a moment after it is asked to).
   */
  static DynamoDbKeyStore answeringStore(String tableName) {
    DynamoDbKeyStore store =
        DynamoDbKeyStore.builder(DynaliteClients.client(Dynalite.shared().endpoint()))
            .tableName(tableName)
            .createTableIfMissing(true)
            .build();
    try {
      Poll.within(Duration.ofSeconds(60))
          .every(Duration.ofMillis(50))
          .ignoring(KeyStoreException.class)
          .until("the table answers", () -> store.find("warm", Instant.now()), found -> true);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
    return store;
  }
}
