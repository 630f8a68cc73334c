/**
 * Spring integration of the idempotency guard: {@link dev.idempotency.spring.Idempotent} on bean
 * methods, through a Spring AOP advisor ({@link dev.idempotency.spring.IdempotentMethodAdvisor}),
 * and {@link dev.idempotency.spring.JsonCodecs} on the application's Jackson 2 or 3 mapper.
 */
@NullMarked
package dev.idempotency.spring;

import org.jspecify.annotations.NullMarked;
