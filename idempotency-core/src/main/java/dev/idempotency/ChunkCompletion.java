package dev.idempotency;

import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.KeyStore;
import java.util.ArrayList;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * Writes a chunk of outcomes with one {@link KeyStore#completeAll}. A store that fails the whole
 * chunk because one record cannot be read ({@link UnreadableRecordException}: the store answered,
 * so it is no outage) gets the chunk again key by key, so that the unreadable key alone is not
 * written (SPEC 1: one key's damaged record must not keep the other outcomes from being recorded,
 * and their keys from being sent again once their leases end). Any other failure is the whole
 * chunk's, as before: the store is down, and the caller tries again later.
 */
final class ChunkCompletion {

  /**
   * What a chunk's write did.
   *
   * @param written one entry per request, in order: whether it was written; null for a request not
   *     tried because the store failed while the chunk was written key by key
   * @param failure that failure, or null if every request was tried
   */
  record Result(List<@Nullable Boolean> written, @Nullable RuntimeException failure) {}

  private ChunkCompletion() {}

  /**
   * Writes the chunk.
   *
   * @throws RuntimeException the store's failure of the whole chunk (nothing may be assumed
   *     written), as {@link KeyStore#completeAll} throws it
   */
  static Result completeAll(KeyStore store, List<CompleteRequest> requests) {
    try {
      return new Result(new ArrayList<>(store.completeAll(requests)), null);
    } catch (UnreadableRecordException oneRecord) {
      CallEvents.log.debug(
          "A record among {} outcomes cannot be read; writing them one at a time",
          requests.size(),
          oneRecord);
      return oneAtATime(store, requests);
    }
  }

  private static Result oneAtATime(KeyStore store, List<CompleteRequest> requests) {
    List<@Nullable Boolean> written = new ArrayList<>(requests.size());
    RuntimeException failure = null;
    for (CompleteRequest request : requests) {
      if (failure != null) {
        written.add(null);
        continue;
      }
      try {
        written.add(store.complete(request));
      } catch (UnreadableRecordException unreadable) {
        written.add(false);
      } catch (RuntimeException storeFailed) {
        failure = storeFailed;
        written.add(null);
      }
    }
    return new Result(written, failure);
  }
}
