package dev.idempotency.spring.web;

import org.aopalliance.aop.Advice;
import org.aopalliance.intercept.MethodInterceptor;
import org.springframework.aop.Pointcut;
import org.springframework.aop.support.AbstractPointcutAdvisor;
import org.springframework.aop.support.annotation.AnnotationMatchingPointcut;
import org.springframework.core.Ordered;
import org.springframework.web.context.request.RequestAttributes;
import org.springframework.web.context.request.RequestContextHolder;

/**
 * Sees an {@link IdempotentEndpoint} handler method start: an advice on the method itself, so it
 * runs after Spring MVC bound and validated the arguments (a request refused by binding or
 * validation never reaches it) and before the method's body. Only a response of a handler that
 * started is stored. It is the innermost advice ({@link Ordered#LOWEST_PRECEDENCE}), so that a call
 * refused by method security around it is not counted as started either. The Spring Boot
 * auto-configuration registers it as an infrastructure bean.
 */
public final class IdempotentEndpointAdvisor extends AbstractPointcutAdvisor {

  private static final long serialVersionUID = 1L;

  private final transient Pointcut pointcut =
      new AnnotationMatchingPointcut(null, IdempotentEndpoint.class, true);

  private final transient MethodInterceptor advice =
      invocation -> {
        RequestAttributes request = RequestContextHolder.getRequestAttributes();
        if (request != null
            && request.getAttribute(EndpointCall.ATTRIBUTE, RequestAttributes.SCOPE_REQUEST)
                instanceof EndpointCall call) {
          call.handlerStarted();
        }
        return invocation.proceed();
      };

  /** Created by the auto-configuration. */
  public IdempotentEndpointAdvisor() {
    setOrder(Ordered.LOWEST_PRECEDENCE);
  }

  @Override
  public Pointcut getPointcut() {
    return pointcut;
  }

  @Override
  public Advice getAdvice() {
    return advice;
  }
}
