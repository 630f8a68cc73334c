package dev.idempotency.spring.web;

import org.junit.jupiter.api.BeforeAll;

/** {@link WebFluxEventLoopConcurrencyProbeTest} on Redis (embedded server). */
class WebFluxEventLoopConcurrencyRedisProbeTest extends WebFluxEventLoopConcurrencyProbeTest {

  @BeforeAll
  static void start() {
    start(WebFluxTestStores.REDIS, WebFluxTestStores.OnRedis.class);
  }
}
