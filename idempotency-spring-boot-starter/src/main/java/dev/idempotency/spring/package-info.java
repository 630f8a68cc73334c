/**
 * Spring integration of the idempotency guard: {@link dev.idempotency.spring.Idempotent} on bean
 * methods, through a Spring AOP advisor ({@link dev.idempotency.spring.IdempotentMethodAdvisor}),
 * {@link dev.idempotency.spring.JsonCodecs} on the application's Jackson 2 or 3 mapper, and {@link
 * dev.idempotency.spring.JsonFingerprints}. For the starter's integrations (web, messaging): {@link
 * dev.idempotency.spring.IdempotentInvoker} runs a guarded method call given its key, and {@link
 * dev.idempotency.spring.PendingCall} a guarded call whose work runs on the calling thread and ends
 * later.
 */
@NullMarked
package dev.idempotency.spring;

import org.jspecify.annotations.NullMarked;
