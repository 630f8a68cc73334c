package dev.idempotency.spring.web;

import org.junit.jupiter.api.BeforeAll;

/** {@link WebFluxBlockingListenerProbeTest} on Redis (embedded server). */
class WebFluxBlockingListenerRedisProbeTest extends WebFluxBlockingListenerProbeTest {

  @BeforeAll
  static void start() {
    start(
        WebFluxTestStores.REDIS,
        WebFluxTestStores.OnRedis.class,
        WebFluxBlockingListenerProbeTest.BlockingListener.class);
  }
}
