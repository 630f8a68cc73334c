package dev.idempotency.spring.web;

import static dev.idempotency.spring.web.StoredStatuses.isStored;

import dev.idempotency.spring.PendingCall;
import dev.idempotency.spring.web.LateResponse.UnresolvedFailure;
import dev.idempotency.spring.web.StoredStatuses.NotStored;
import java.util.List;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Records the late result of a call whose request a timeout or a shutdown detached from its work,
 * as Spring MVC would have answered it on time ({@link LateResponse}): a value rendered and stored,
 * a failure through the application's exception resolvers, so that one its {@code ExceptionHandler}
 * maps to a kept 4xx is stored and one that nothing maps (a 500) releases the key. A failure whose
 * status cannot be resolved here is recorded as answered without its response: the send happened,
 * so a retry must not send again (SPEC 1). Split out of {@link AsyncWork}, which decides when a
 * late result is recorded ({@link AsyncWork#lateResult}), and logged under {@code EndpointCall}'s
 * logger, as before.
 */
final class LateResultRecord {

  /** Under EndpointCall's logger, as before this class was split out of AsyncWork. */
  private static final Logger log = LoggerFactory.getLogger(EndpointCall.class);

  private LateResultRecord() {}

  /**
   * Records {@code result} (a value, or the work's failure) for {@code call}, rendered with {@code
   * response} and {@code headers}, the response headers to store besides the usual ones.
   */
  static void record(
      PendingCall<StoredResponse> call,
      LateResponse response,
      @Nullable Object result,
      List<String> headers) {
    try {
      StoredResponse stored;
      if (result instanceof Throwable failure) {
        try {
          stored = response.renderFailure(failure, headers);
        } catch (UnresolvedFailure e) {
          log.warn(
              "The late failure ({}) of a timed-out idempotent request could not be resolved"
                  + " to a status: recorded as answered without its response, so a retry is"
                  + " not run again",
              failure.getClass().getName(),
              e);
          call.complete(new StoredResponse(StoredStatuses.statusOf(failure), List.of(), null));
          return;
        }
        if (stored == null) {
          call.fail(
              new NotStored(
                  "the async result failed after its request timed out and nothing maps it: "
                      + failure.getClass().getName()));
          return;
        }
      } else {
        stored = response.render(result, headers);
      }
      if (isStored(stored.status())) {
        call.complete(stored);
      } else {
        call.fail(new NotStored("status " + stored.status() + " is not stored"));
      }
    } catch (RuntimeException | Error e) {
      log.warn("The late result of a timed-out idempotent request could not be stored", e);
      throw e;
    }
  }
}
