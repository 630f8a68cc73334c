package dev.idempotency.spring.web;

import java.lang.reflect.Method;
import java.util.Objects;
import java.util.function.Supplier;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.core.Ordered;
import org.springframework.web.method.HandlerMethod;
import org.springframework.web.reactive.DispatchExceptionHandler;
import org.springframework.web.reactive.HandlerAdapter;
import org.springframework.web.reactive.HandlerResult;
import org.springframework.web.reactive.result.method.annotation.RequestMappingHandlerAdapter;
import org.springframework.web.server.ServerWebExchange;
import reactor.core.publisher.Mono;

/**
 * Invokes a Spring WebFlux {@link IdempotentEndpoint} handler method only for a request that the
 * {@link IdempotentEndpointWebFilter} decided about for that same method; any other request that
 * reaches it is refused (an {@link IllegalStateException} that names the handler: a 500, nothing
 * sent). The filter looks the handler up before the filters after it run; one of those that changes
 * the request (rewrites an old path to a guarded handler's, say) makes the dispatcher reach a
 * guarded handler the filter never saw, which would otherwise run unguarded, every repeat sending
 * again (SPEC 1).
 *
 * <p><b>Why here, and why refuse.</b> The dispatcher's handler adapter is where the handler it
 * really invokes meets the exchange; the filter's {@link IdempotentEndpointInvocations} advice sees
 * the invocation but not its request, and a guarded request's invocation may legitimately arrive
 * there unmarked (an argument that arrives asynchronously, such as a session loaded from a remote
 * store), so refusing there would refuse valid requests. Guarding the request here instead
 * (claiming its key after the rewrite) would split the endpoint in two places, with the request
 * body already consumed by the filters before; a rewrite after the endpoint's filter is an
 * application's mistake that a clear refusal names, and the fix is the application's: rewrite
 * before it (a filter ordered before {@link IdempotentEndpointWebFilter#ORDER}).
 *
 * <p>Ordered first among the handler adapters; it delegates every request it lets through, and
 * every error, to the application's {@link RequestMappingHandlerAdapter}. Thread-safe.
 */
public final class IdempotentEndpointHandlerAdapter
    implements HandlerAdapter, DispatchExceptionHandler, Ordered, SmartInitializingSingleton {

  /** The exchange attribute that names the handler method the endpoint's filter decided about. */
  static final String DECIDED_ATTRIBUTE =
      IdempotentEndpointHandlerAdapter.class.getName() + ".DECIDED";

  private final IdempotentEndpoints endpoints;
  private volatile Supplier<RequestMappingHandlerAdapter> delegate;

  /**
   * Creates the adapter.
   *
   * @param endpoints the annotated handler methods
   * @param delegate the application's annotated-controller adapter, which invokes the handlers
   */
  public IdempotentEndpointHandlerAdapter(
      IdempotentEndpoints endpoints, Supplier<RequestMappingHandlerAdapter> delegate) {
    this.endpoints = Objects.requireNonNull(endpoints, "endpoints must not be null");
    this.delegate = Objects.requireNonNull(delegate, "delegate must not be null");
  }

  /**
   * Looks the delegate up once the context has made its singletons, before the server takes
   * requests: a first lookup from requests on the event loop would wait for its lock (BlockHound
   * saw an event loop park there when two first requests came at once).
   */
  @Override
  public void afterSingletonsInstantiated() {
    RequestMappingHandlerAdapter resolved = delegate.get();
    delegate = () -> resolved;
  }

  /** Marks the exchange as decided about by the endpoint's filter, for {@code method}. */
  static void decided(ServerWebExchange exchange, Method method) {
    exchange.getAttributes().put(DECIDED_ATTRIBUTE, method);
  }

  @Override
  public int getOrder() {
    return Ordered.HIGHEST_PRECEDENCE;
  }

  @Override
  public boolean supports(Object handler) {
    return handler instanceof HandlerMethod method && endpoints.find(method) != null;
  }

  @Override
  public Mono<HandlerResult> handle(ServerWebExchange exchange, Object handler) {
    IdempotentEndpoints.Endpoint endpoint =
        Objects.requireNonNull(endpoints.find((HandlerMethod) handler));
    if (!endpoint.method().equals(exchange.getAttribute(DECIDED_ATTRIBUTE))) {
      return Mono.error(
          new IllegalStateException(
              endpoint.where()
                  + " was reached by a request that the IdempotentEndpointWebFilter did not"
                  + " guard: a WebFilter after it (ordered after "
                  + IdempotentEndpointWebFilter.ORDER
                  + ") changed the request (its path, say) so that it maps to this handler; it is"
                  + " refused so that it never runs unguarded. Change the request in a filter"
                  + " ordered before the endpoint's, or map the old path to the handler itself"));
    }
    return delegate.get().handle(exchange, handler);
  }

  @Override
  public Mono<HandlerResult> handleError(ServerWebExchange exchange, Throwable error) {
    return delegate.get().handleError(exchange, error);
  }
}
