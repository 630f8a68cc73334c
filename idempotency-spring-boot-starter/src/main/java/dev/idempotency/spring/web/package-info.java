/**
 * The IETF {@code Idempotency-Key} header on Spring MVC endpoints: {@link
 * dev.idempotency.spring.web.IdempotentEndpoint} and the filter behind it.
 */
@NullMarked
package dev.idempotency.spring.web;

import org.jspecify.annotations.NullMarked;
