/**
 * The IETF {@code Idempotency-Key} header on Spring MVC endpoints: {@link
 * dev.idempotency.spring.web.IdempotentEndpoint} and the filter behind it.
 */
package dev.idempotency.spring.web;
