package dev.idempotency.spring.web;

/**
 * Probe (probeV) of fb27539, as MvcLateFallbackResolverProbeTest but with no resolver of the
 * application's: the failure's class carries a default status, {@code @ResponseStatus(BAD_GATEWAY)}
 * (a provider's refusal is a 502 wherever nothing better is said), and the API's advice maps it to
 * a kept 422 with the tenant from the query parameter. On time the advice wins (Spring's
 * ExceptionHandlerExceptionResolver comes before its ResponseStatusExceptionResolver): 422 stored
 * and replayed, one send (control). After the container async timeout the advice fails on the ended
 * request (no parameters), Spring swallows that, and ResponseStatusExceptionResolver answers the
 * class's 502: a 5xx, so the key is released and the retry sends again; fb27539's check runs only
 * when no resolver answered. SPEC 1, SPEC 13.
 *
 * <p>Fixed (fixlate2): an {@code @ExceptionHandler} that answers nothing on the ended request
 * leaves the status unknown, whatever a later resolver answers. Since the ended request keeps its
 * parameters, the advice here also reads the session, which the ended request does not keep, so
 * that it still fails late. It was an open finding, medium-high (a second provider send for one
 * key). Main a8f923a, Boot 3.5 and 4.0, in-memory store: fails 2 of 4 on each (Callable and
 * CompletableFuture: 'provider sends for one key (first 409 ... request-in-progress ...; retry 422
 * replayed=null {"error":"recipient-blocked","tenant":"acme"}) expected: 1 but was: 2'); the
 * on-time controls pass.
 *
 * <p>Its cases are {@link MvcLateResolutionCases}'s, on {@code /probeV/late-status/…} of the
 * application the four probes share, {@link MvcLateResolutionApplication}.
 */
class MvcLateResponseStatusProbeTest extends MvcLateResolutionCases {

  MvcLateResponseStatusProbeTest() {
    super("late-status", 422);
  }
}
