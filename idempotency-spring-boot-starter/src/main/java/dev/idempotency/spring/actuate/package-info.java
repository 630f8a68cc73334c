/**
 * Spring Boot Actuator support: the {@code idempotency} health contributor (the store's kind and
 * whether it answers) and the {@code idempotency} endpoint (read a key's record, forget it).
 */
@NullMarked
package dev.idempotency.spring.actuate;

import org.jspecify.annotations.NullMarked;
