package dev.idempotency.spring.web;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import org.aopalliance.aop.Advice;
import org.aopalliance.intercept.MethodInterceptor;
import org.jspecify.annotations.Nullable;
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
          Object returned = invocation.proceed();
          if (returned instanceof CompletionStage<?> stage) {
            // At a timeout Spring MVC cancels the stage it got and expires its own adapter of it:
            // it gets a copy, and the handler's own stage tells a timed-out call its result
            Object copy = copyOf(stage, invocation.getMethod().getReturnType());
            if (copy == null) {
              return returned;
            }
            returned = copy;
            call.observesLateResult();
            stage.whenComplete(
                (value, failure) ->
                    call.lateResult(
                        failure instanceof CompletionException && failure.getCause() != null
                            ? failure.getCause()
                            : failure != null ? failure : value));
          }
          return returned;
        }
        return invocation.proceed();
      };

  /** A copy of {@code stage} that the method may return, or null. */
  private static @Nullable Object copyOf(CompletionStage<?> stage, Class<?> returnType) {
    if (!returnType.isAssignableFrom(CompletableFuture.class)) {
      return null;
    }
    try {
      return stage.toCompletableFuture().copy();
    } catch (UnsupportedOperationException e) {
      return null;
    }
  }

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
