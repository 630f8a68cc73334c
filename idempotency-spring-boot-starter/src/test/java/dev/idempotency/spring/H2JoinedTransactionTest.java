package dev.idempotency.spring;

import org.springframework.test.context.TestPropertySource;

/** The joined-transaction contract on H2. */
@TestPropertySource(properties = "spring.datasource.url=jdbc:h2:mem:joined-http;DB_CLOSE_DELAY=-1")
class H2JoinedTransactionTest extends JoinedTransactionContract {}
