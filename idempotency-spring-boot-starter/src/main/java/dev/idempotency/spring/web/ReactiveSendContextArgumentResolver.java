package dev.idempotency.spring.web;

import dev.idempotency.SendContext;
import org.jspecify.annotations.Nullable;
import org.springframework.core.MethodParameter;
import org.springframework.web.reactive.BindingContext;
import org.springframework.web.reactive.result.method.SyncHandlerMethodArgumentResolver;
import org.springframework.web.server.ServerWebExchange;

/**
 * Resolves a {@link SendContext} parameter of an {@link IdempotentEndpoint} handler method on
 * Spring WebFlux, as {@link SendContextArgumentResolver} does on Spring MVC: the call's provider
 * key, provider UUID and attempt, which {@link IdempotentEndpointWebFilter} put on the exchange.
 * {@code null} when an endpoint that does not require the key is called without one.
 *
 * <pre>{@code
 * @PostMapping("/notify")
 * @IdempotentEndpoint
 * Mono<Receipt> notify(@RequestBody Message message, SendContext context) {
 *   return sms.send(message, context.providerKey());
 * }
 * }</pre>
 */
public final class ReactiveSendContextArgumentResolver
    implements SyncHandlerMethodArgumentResolver {

  /** Created by the auto-configuration. */
  public ReactiveSendContextArgumentResolver() {}

  @Override
  public boolean supportsParameter(MethodParameter parameter) {
    return SendContext.class.equals(parameter.getParameterType());
  }

  @Override
  public @Nullable Object resolveArgumentValue(
      MethodParameter parameter, BindingContext bindingContext, ServerWebExchange exchange) {
    return EndpointKeys.sendContext(
        parameter, exchange.getAttribute(IdempotentEndpointWebFilter.SEND_CONTEXT_ATTRIBUTE));
  }
}
