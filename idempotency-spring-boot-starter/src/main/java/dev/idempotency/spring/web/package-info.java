/**
 * The IETF {@code Idempotency-Key} header on Spring MVC endpoints: {@link
 * dev.idempotency.spring.web.IdempotentEndpoint}, and what runs it: the {@link
 * dev.idempotency.spring.web.IdempotentEndpointInterceptor} that claims a request once its handler
 * is chosen, the {@link dev.idempotency.spring.web.IdempotentEndpointAdvisor} that sees the handler
 * start, the {@link dev.idempotency.spring.web.IdempotentEndpointFilter} that follows the request
 * through its async and error dispatches to the response its client gets, and the {@link
 * dev.idempotency.spring.web.IdempotencyKeyScope} that says who a request comes from.
 */
@NullMarked
package dev.idempotency.spring.web;

import org.jspecify.annotations.NullMarked;
