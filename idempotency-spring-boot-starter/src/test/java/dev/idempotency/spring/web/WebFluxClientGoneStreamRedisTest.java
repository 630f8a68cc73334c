package dev.idempotency.spring.web;

import org.junit.jupiter.api.BeforeAll;

/** {@link WebFluxClientGoneStreamTest} on Redis (embedded server). */
class WebFluxClientGoneStreamRedisTest extends WebFluxClientGoneStreamTest {

  @BeforeAll
  static void start() {
    start(WebFluxTestStores.REDIS, WebFluxTestStores.OnRedis.class);
  }
}
