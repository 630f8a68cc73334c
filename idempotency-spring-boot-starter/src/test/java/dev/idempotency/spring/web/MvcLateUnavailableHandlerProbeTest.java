package dev.idempotency.spring.web;

/**
 * Probe (probeV) of fb27539 from the other side: a late failure that an {@code @ExceptionHandler}
 * maps to a 5xx. The provider is unavailable on the first attempt (it refuses before sending:
 * nothing went out) and the API's advice maps that to 503, with the tenant from the query parameter
 * in its body. On time: 503, the key released (SPEC 13: a 5xx releases), the client's retry sends:
 * one send (control). After the container async timeout (1 s, client answered 409) the advice fails
 * on the ended request (no parameters), answers nothing, and fb27539 records the call as answered
 * without its response: every retry in the window gets 422 response-not-stored and the message is
 * never sent, though nothing was sent (SPEC 1: no lost send; the SDK cannot tell a 503 from a 422
 * here, but it kept a key whose send it knows failed).
 *
 * <p>Fixed (fixlate2): the ended request keeps its parameters, so the advice answers its 503 late
 * as on time and the key is released. An {@code @ExceptionHandler} that fails on the ended request
 * (it reads the body) still leaves the status unknown and the key kept (docs/spring-boot.md). It
 * was an open finding, medium-high (a lost send for the whole window; the opposite risk to
 * MvcLateExceptionHandlerRequestProbeTest's, which fb27539 fixed by keeping the key). Main a8f923a,
 * Boot 3.5 and 4.0, in-memory store: fails 2 of 4 on each (Callable and CompletableFuture:
 * 'provider sends for one key (first 409 ... request-in-progress ...; retry 422 replayed=null
 * {"type":"/problems/response-not-stored",...,"original-status":500}) expected: 1 but was: 0'); the
 * on-time controls (503, then the retry sends) pass.
 *
 * <p>Its cases are {@link MvcLateResolutionCases}'s, on {@code /probeV/late-unavailable/…} of the
 * application the four probes share, {@link MvcLateResolutionApplication}.
 */
class MvcLateUnavailableHandlerProbeTest extends MvcLateResolutionCases {

  MvcLateUnavailableHandlerProbeTest() {
    super("late-unavailable", 503);
  }
}
