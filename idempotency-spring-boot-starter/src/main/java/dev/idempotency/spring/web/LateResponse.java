package dev.idempotency.spring.web;

import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.util.List;
import org.jspecify.annotations.Nullable;
import org.springframework.core.MethodParameter;
import org.springframework.core.ResolvableType;
import org.springframework.web.bind.annotation.ResponseStatus;
import org.springframework.web.context.WebApplicationContext;
import org.springframework.web.context.request.ServletWebRequest;
import org.springframework.web.method.HandlerMethod;
import org.springframework.web.method.support.HandlerMethodReturnValueHandler;
import org.springframework.web.method.support.HandlerMethodReturnValueHandlerComposite;
import org.springframework.web.method.support.ModelAndViewContainer;
import org.springframework.web.servlet.mvc.method.annotation.RequestMappingHandlerAdapter;
import org.springframework.web.servlet.support.RequestContextUtils;

/**
 * The response an async handler's result would have been, rendered after its request timed out and
 * ended: with Spring MVC's own return value handlers (message converters, content negotiation,
 * {@code ResponseEntity}), against a copy of the request taken while it was still valid (method,
 * URI, headers, attributes) and an in-memory response. What cannot be rendered so (a view) is
 * stored without a body: the send happened, so a repeat must not send again.
 */
final class LateResponse {

  private final HandlerMethod handler;
  private final @Nullable HandlerMethodReturnValueHandlerComposite handlers;
  private final EndedRequest request;
  private final long limit;

  private LateResponse(
      HandlerMethod handler,
      @Nullable HandlerMethodReturnValueHandlerComposite handlers,
      EndedRequest request,
      long limit) {
    this.handler = handler;
    this.handlers = handlers;
    this.request = request;
    this.limit = limit;
  }

  /** A copy of what rendering reads of {@code request}, taken while it is valid. */
  static LateResponse of(HttpServletRequest request, HandlerMethod handler, long limit) {
    return new LateResponse(
        handler, returnValueHandlers(request), EndedRequest.copyOf(request), limit);
  }

  private static @Nullable HandlerMethodReturnValueHandlerComposite returnValueHandlers(
      HttpServletRequest request) {
    WebApplicationContext context = RequestContextUtils.findWebApplicationContext(request);
    RequestMappingHandlerAdapter adapter =
        context == null
            ? null
            : context.getBeanProvider(RequestMappingHandlerAdapter.class).getIfUnique();
    List<HandlerMethodReturnValueHandler> handlers =
        adapter == null ? null : adapter.getReturnValueHandlers();
    return handlers == null
        ? null
        : new HandlerMethodReturnValueHandlerComposite().addHandlers(handlers);
  }

  /**
   * The response for {@code value}, the async result, as it would have been written.
   *
   * @param listedHeaders the headers the endpoint lists to store
   */
  StoredResponse render(@Nullable Object value, List<String> listedHeaders) {
    InMemoryResponse response = new InMemoryResponse();
    HttpServletResponse servletResponse = response.proxy();
    ResponseStatus status = handler.getMethodAnnotation(ResponseStatus.class);
    if (status != null) {
      servletResponse.setStatus(status.code().value());
    }
    boolean rendered = false;
    if (handlers != null) {
      ServletWebRequest web = new ServletWebRequest(request.proxy(), servletResponse);
      ModelAndViewContainer model = new ModelAndViewContainer();
      try {
        handlers.handleReturnValue(value, new AsyncResultType(handler, value), model, web);
        rendered = model.isRequestHandled();
      } catch (Exception e) {
        rendered = false;
      }
    }
    try {
      servletResponse.flushBuffer();
    } catch (java.io.IOException e) {
      rendered = false;
    }
    byte[] body = response.body.toByteArray();
    StoredResponse stored =
        StoredResponse.capture(
            servletResponse, rendered && body.length <= limit ? body : null, listedHeaders);
    return rendered ? stored : stored.withoutBody();
  }

  /** The async result's type, as Spring MVC's own concurrent-result parameter gives it. */
  private static final class AsyncResultType extends MethodParameter {
    private final Class<?> beanType;
    private final ResolvableType type;
    private final @Nullable Object value;

    AsyncResultType(HandlerMethod handler, @Nullable Object value) {
      super(handler.getMethod(), -1);
      this.beanType = handler.getBeanType();
      this.type = ResolvableType.forMethodReturnType(handler.getMethod()).getGeneric();
      this.value = value;
    }

    private AsyncResultType(AsyncResultType original) {
      super(original);
      this.beanType = original.beanType;
      this.type = original.type;
      this.value = original.value;
    }

    @Override
    public Class<?> getContainingClass() {
      return beanType;
    }

    @Override
    public Class<?> getParameterType() {
      if (value != null) {
        return value.getClass();
      }
      return ResolvableType.NONE.equals(type) ? super.getParameterType() : type.toClass();
    }

    @Override
    public java.lang.reflect.Type getGenericParameterType() {
      return type.getType();
    }

    @Override
    public AsyncResultType clone() {
      return new AsyncResultType(this);
    }
  }
}
