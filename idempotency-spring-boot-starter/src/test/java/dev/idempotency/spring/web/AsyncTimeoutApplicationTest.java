package dev.idempotency.spring.web;

import dev.idempotency.spring.app.NotifyTestApplication;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import org.springframework.boot.test.context.SpringBootTest;

/**
 * The one application of the async-timeout shape tests ({@link AsyncShapesTimeoutTest}, {@link
 * AsyncShapesTimeoutHeldTest}, {@link ObjectDeclaredAsyncTimeoutTest}), so they share one context:
 * the probe controllers, a container async timeout (1 s) shorter than their provider call, which
 * ends once the test's client has the timeout's answer ({@link FirstAnswer}, or {@link
 * AsyncShapesTimeoutTest}'s gate).
 */
@Target(ElementType.TYPE)
@Retention(RetentionPolicy.RUNTIME)
@SpringBootTest(
    classes = {
      NotifyTestApplication.class,
      ObjectDeclaredAsyncTimeoutTest.ObjectDeclaredController.class,
      AsyncShapesTimeoutTest.ProbeController.class,
      SerializableCallableTimeoutTest.SerializableController.class,
      AsyncTimeoutFallbackTest.FallbackConfiguration.class,
      AsyncTimeoutFallbackTest.FallbackController.class
    },
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
    properties = {
      "idempotency.store=memory",
      "spring.mvc.async.request-timeout=1s",
      // AsyncShapesTimeoutTest's unfollowed results keep their keys claimed: closing the context
      // must not wait the default 30 s for them
      "idempotency.close-grace-period=1s"
    })
@interface AsyncTimeoutApplicationTest {}
