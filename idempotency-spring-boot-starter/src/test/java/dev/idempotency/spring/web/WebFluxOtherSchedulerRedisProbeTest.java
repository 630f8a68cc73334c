package dev.idempotency.spring.web;

import dev.idempotency.spring.reactive.BlockingCalls;
import org.junit.jupiter.api.BeforeAll;

/**
 * {@link WebFluxOtherSchedulerProbeSupport} on Redis: the guard's steps go on on the request's
 * event loop (673470c), the handler answers on another scheduler.
 */
class WebFluxOtherSchedulerRedisProbeTest extends WebFluxOtherSchedulerProbeSupport {

  @BeforeAll
  static void start() {
    BlockingCalls.install();
    start(WebFluxTestStores.REDIS, WebFluxTestStores.OnRedis.class, OtherSchedulers.class);
  }
}
