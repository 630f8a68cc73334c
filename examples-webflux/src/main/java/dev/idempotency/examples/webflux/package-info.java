/**
 * The notify service on Spring WebFlux: {@code POST /notify} guarded by {@code IdempotentEndpoint}
 * on Redis, with a non-blocking provider client ({@code WebClient}).
 */
package dev.idempotency.examples.webflux;
