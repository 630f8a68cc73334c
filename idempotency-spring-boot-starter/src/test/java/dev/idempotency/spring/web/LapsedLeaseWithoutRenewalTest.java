package dev.idempotency.spring.web;

import org.springframework.boot.test.context.SpringBootTest;

/**
 * Issue 37 (SPEC 1 and 16), real HTTP on Tomcat: {@link LapsedLeaseQueuedCallableTest}'s case with
 * lease renewal off ({@code idempotency.lease-renewal=false}) and a healthy store (the store's
 * refusal of renewals never comes into play): a {@code Callable} endpoint's work that waits in
 * Spring MVC's async executor longer than its key's lease must not send once another request took
 * the lapsed key over. At most one provider send for the key, and none by the first request.
 */
@SpringBootTest(
    classes = LapsedLeaseQueuedCallableTest.LapseApp.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
    properties = {
      "idempotency.lease=2s",
      "idempotency.lease-renewal=false",
      "spring.mvc.async.request-timeout=120s",
      "spring.task.execution.pool.core-size=1",
      "spring.task.execution.pool.max-size=1"
    })
class LapsedLeaseWithoutRenewalTest extends LapsedLeaseQueuedCallableTest {}
