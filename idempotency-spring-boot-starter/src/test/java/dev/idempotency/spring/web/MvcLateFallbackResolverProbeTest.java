package dev.idempotency.spring.web;

/**
 * Probe (probeV) of fb27539 (LateResponse: a late failure that an {@code @ExceptionHandler} is
 * declared for but that answers nothing on the ended request is recorded as answered without its
 * response, never released). The application of MvcLateExceptionHandlerRequestProbeTest (an advice
 * maps the failure after the send to a kept 422 and reads the query parameter {@code tenant}), plus
 * what many MVC applications have: a last-resort {@code HandlerExceptionResolver} bean (ordered
 * last, as a {@code SimpleMappingExceptionResolver} with a default error view is) that answers 500
 * for whatever no other resolver mapped. On time: 422 stored and replayed, one send (control).
 * After the container async timeout (1 s, client answered 409) the {@code ExceptionHandler} fails
 * on the ended request (no parameters), Spring's resolver swallows that, and the fallback answers
 * 500: {@code renderFailure} gets a view, so fb27539's check (taken only when no resolver answered)
 * never runs; the 500 releases the key and the retry sends again. SPEC 1 (at most one send per
 * key), SPEC 13 (a 5xx releases only where the status is known to be one).
 *
 * <p>Fixed (fixlate2): an {@code @ExceptionHandler} that answers nothing on the ended request
 * leaves the status unknown, whatever a later resolver answers. Since the ended request keeps its
 * parameters, the advice here also reads the session, which the ended request does not keep, so
 * that it still fails late. It was an open finding, medium-high (a second provider send for one
 * key, as probeU's MvcLateExceptionHandlerRequestProbeTest before fb27539). Main a8f923a, Boot 3.5
 * and 4.0, on the in-memory store and (subclasses) real Redis and PostgreSQL: fails 2 of 4 on each
 * (Callable and CompletableFuture: 'provider sends for one key (first 409 ... request-in-progress
 * ...; retry 422 replayed=null {"error":"recipient-blocked","tenant":"acme"}) expected: 1 but was:
 * 2'); the on-time controls pass. The log shows 'Failure in @ExceptionHandler' for the late
 * resolution.
 *
 * <p>Its cases are {@link MvcLateResolutionCases}'s, on {@code /probeV/late-fallback/…} of the
 * application the four probes share, {@link MvcLateResolutionApplication}.
 */
class MvcLateFallbackResolverProbeTest extends MvcLateResolutionCases {

  MvcLateFallbackResolverProbeTest() {
    super("late-fallback", 422);
  }
}
