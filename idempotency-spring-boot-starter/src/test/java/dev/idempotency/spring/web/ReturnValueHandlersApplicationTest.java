package dev.idempotency.spring.web;

import dev.idempotency.spring.app.NotifyTestApplication;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import org.springframework.boot.test.context.SpringBootTest;

/**
 * The one application of the tests of an application that changes Spring MVC's return value
 * handlers ({@link DecoratedHandlersCallableTest}, {@link LateHandlerRebuildTest}), so they share
 * one context: a tracing library's decoration of every handler, handlers added before, after and
 * long after the starter's {@link AsyncWorkShield} looked at them, a second {@code
 * RequestMappingHandlerAdapter}, and a container async timeout (1 s) shorter than the handlers'
 * provider call (3 s).
 */
@Target(ElementType.TYPE)
@Retention(RetentionPolicy.RUNTIME)
@SpringBootTest(
    classes = {
      NotifyTestApplication.class,
      DecoratedHandlersCallableTest.Decorating.class,
      DecoratedHandlersCallableTest.WaitingController.class,
      LateHandlerRebuildTest.LateHandlers.class,
      LateHandlerRebuildTest.LateController.class,
      LateHandlerRebuildTest.SecondAdapterController.class
    },
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
    properties = {
      "idempotency.store=memory",
      "spring.mvc.async.request-timeout=1s",
      "idempotency.close-grace-period=1s"
    })
@interface ReturnValueHandlersApplicationTest {}
