package dev.idempotency.spring.web;

import java.lang.reflect.Method;
import org.springframework.core.MethodParameter;
import org.springframework.core.ReactiveAdapterRegistry;
import org.springframework.web.method.annotation.HandlerMethodValidationException;
import org.springframework.web.server.ServerWebInputException;

/**
 * Errors by which Spring WebFlux refused a request while resolving or validating the arguments of a
 * given handler method, before invoking it: a {@code ServerWebInputException} that names one of the
 * method's parameters (its body could not be decoded or bound, a parameter is missing or invalid)
 * or a {@code HandlerMethodValidationException} of the method. The exception type alone says
 * nothing: a handler that has sent may throw a {@code ServerWebInputException} of its own, and its
 * answer is then final. {@link IdempotentEndpointInvocations} is the main evidence; this one holds
 * when that cannot tell (an invocation of the same method it could not attribute to its request
 * happened at the same time). A parameter of a reactive type ({@code @RequestBody Flux<Item>},
 * {@code Mono<Order>}) is decoded and validated after the method was invoked, as the handler
 * subscribes to it: its refusal comes after the handler may have sent, so it is the handler's
 * answer, not a refusal before it ran.
 */
final class HandlerRefusals {

  private HandlerRefusals() {}

  static boolean isArgumentRefusal(Throwable error, Method method) {
    if (error instanceof ServerWebInputException input) {
      MethodParameter parameter = input.getMethodParameter();
      return parameter != null
          && method.equals(parameter.getMethod())
          && ReactiveAdapterRegistry.getSharedInstance().getAdapter(parameter.getParameterType())
              == null;
    }
    return error instanceof HandlerMethodValidationException validation
        && method.equals(validation.getMethod());
  }
}
