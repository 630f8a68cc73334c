package dev.idempotency.spring.reactive;

import org.springframework.test.context.TestPropertySource;

/** The {@code Mono} contract on the in-memory store. */
@TestPropertySource(properties = "idempotency.store=memory")
class MemoryMonoIdempotentTest extends MonoIdempotentContract {}
