package dev.idempotency.spring.web;

import dev.idempotency.SendContext;
import org.jspecify.annotations.Nullable;
import org.springframework.core.MethodParameter;
import org.springframework.web.bind.support.WebDataBinderFactory;
import org.springframework.web.context.request.NativeWebRequest;
import org.springframework.web.context.request.RequestAttributes;
import org.springframework.web.method.support.HandlerMethodArgumentResolver;
import org.springframework.web.method.support.ModelAndViewContainer;

/**
 * Resolves a {@link SendContext} parameter of an {@link IdempotentEndpoint} handler method: the
 * call's provider key, provider UUID and attempt, to pass to the provider. {@code null} when an
 * endpoint that does not require the key is called without one. A handler without the annotation
 * cannot take one: the application fails at startup ({@link IdempotentEndpoints}).
 *
 * <pre>{@code
 * @PostMapping("/notify")
 * @IdempotentEndpoint
 * Receipt notify(@RequestBody Message message, SendContext context) {
 *   return sms.send(message, context.providerKey());
 * }
 * }</pre>
 */
public final class SendContextArgumentResolver implements HandlerMethodArgumentResolver {

  /** Created by the auto-configuration. */
  public SendContextArgumentResolver() {}

  @Override
  public boolean supportsParameter(MethodParameter parameter) {
    return SendContext.class.equals(parameter.getParameterType());
  }

  @Override
  public @Nullable Object resolveArgument(
      MethodParameter parameter,
      ModelAndViewContainer container,
      NativeWebRequest request,
      WebDataBinderFactory binderFactory) {
    return EndpointKeys.sendContext(
        parameter,
        request.getAttribute(
            IdempotentEndpointFilter.SEND_CONTEXT_ATTRIBUTE, RequestAttributes.SCOPE_REQUEST));
  }
}
