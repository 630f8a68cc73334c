package dev.idempotency.spring.web;

/**
 * Probe (probeV) of fb27539: the same hazard as probeU's MvcLateExceptionHandlerRequestProbeTest,
 * with the application's own {@code HandlerExceptionResolver} bean in place of an {@code
 * ExceptionHandler}. The resolver maps a failure after the send to a kept 422 for the requests of a
 * tenant ({@code ?tenant=acme}) and leaves the others (null) to the next resolver. On time: 422
 * stored and replayed, one send (control). After the container async timeout (1 s, client answered
 * 409) {@code LateResponse} resolves the failure against the ended request, which has no
 * parameters: the resolver answers null, no {@code @ExceptionHandler} is declared for the failure,
 * so fb27539's check does not apply, {@code renderFailure} answers "nothing maps it" (a 500) and
 * the key is released: the retry sends again. SPEC 1, SPEC 13.
 *
 * <p>Fixed (fixlate2): the ended request keeps the request's parameters. It was an open finding,
 * medium (a second provider send for one key; an application resolver that depends on request
 * parameters is less common than an {@code @ExceptionHandler}). Main a8f923a, Boot 3.5 and 4.0,
 * in-memory store: fails 2 of 4 on each (Callable and CompletableFuture: 'provider sends for one
 * key (first 409 ... request-in-progress ...; retry 422 replayed=null
 * {"error":"recipient-blocked","tenant":"acme"}) expected: 1 but was: 2'); the on-time controls
 * pass.
 *
 * <p>Its cases are {@link MvcLateResolutionCases}'s, on {@code /probeV/late-custom/…} of the
 * application the four probes share, {@link MvcLateResolutionApplication}.
 */
class MvcLateCustomResolverProbeTest extends MvcLateResolutionCases {

  MvcLateCustomResolverProbeTest() {
    super("late-custom", 422);
  }
}
