package dev.idempotency.spring.web;

import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import org.jspecify.annotations.Nullable;
import org.springframework.beans.factory.BeanFactoryUtils;
import org.springframework.core.MethodParameter;
import org.springframework.core.ResolvableType;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.core.annotation.AnnotationAwareOrderComparator;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.ResponseStatus;
import org.springframework.web.context.WebApplicationContext;
import org.springframework.web.context.request.ServletWebRequest;
import org.springframework.web.method.ControllerAdviceBean;
import org.springframework.web.method.HandlerMethod;
import org.springframework.web.method.annotation.ExceptionHandlerMethodResolver;
import org.springframework.web.method.support.HandlerMethodReturnValueHandler;
import org.springframework.web.method.support.HandlerMethodReturnValueHandlerComposite;
import org.springframework.web.method.support.ModelAndViewContainer;
import org.springframework.web.servlet.HandlerExceptionResolver;
import org.springframework.web.servlet.HandlerMapping;
import org.springframework.web.servlet.ModelAndView;
import org.springframework.web.servlet.handler.HandlerExceptionResolverComposite;
import org.springframework.web.servlet.mvc.method.annotation.ExceptionHandlerExceptionResolver;
import org.springframework.web.servlet.mvc.method.annotation.RequestMappingHandlerAdapter;
import org.springframework.web.servlet.support.RequestContextUtils;

/**
 * The response an async handler's result would have been, rendered after its request timed out and
 * ended, as Spring MVC would have rendered it on time: into an in-memory response that starts as
 * the handler left the request's response when the work went async (its status and headers), with
 * the handler's {@code @ResponseStatus} (the method's, else its class's), then Spring MVC's own
 * return value handlers (message converters, content negotiation, {@code ResponseEntity}); a
 * failure goes through the application's {@code HandlerExceptionResolver}s in {@code
 * DispatcherServlet}'s order ({@code @ExceptionHandler} methods of the controller and of {@code
 * ControllerAdvice} beans, {@code ResponseStatusExceptionResolver}, {@code
 * DefaultHandlerExceptionResolver}). The request is a copy taken while it was still valid (method,
 * URI, headers, attributes, parameters). Status and headers that the work set on its response after
 * its request ended ({@link #workResponse}) are rendered too, as they would have been on time. What
 * cannot be rendered so (a view, an error page) is stored without its body, or with a problem
 * detail: the send happened, so a repeat must not send again.
 */
final class LateResponse {

  private final HandlerMethod handler;
  private final EndedRequest request;
  private final InMemoryResponse leftAs;
  private final long limit;
  private final @Nullable WebApplicationContext context;

  private LateResponse(
      @Nullable WebApplicationContext context,
      HandlerMethod handler,
      EndedRequest request,
      InMemoryResponse leftAs,
      long limit) {
    this.context = context;
    this.handler = handler;
    this.request = request;
    this.leftAs = leftAs;
    this.limit = limit;
  }

  /**
   * A copy of what rendering reads of {@code request} and of {@code response} as the handler left
   * it (status, headers, not the body), taken while they are valid. Spring MVC's return value
   * handlers and exception resolvers are looked up in the request's application context when a
   * result is rendered.
   */
  static LateResponse of(
      HttpServletRequest request, HttpServletResponse response, HandlerMethod handler, long limit) {
    return new LateResponse(
        RequestContextUtils.findWebApplicationContext(request),
        handler,
        EndedRequest.copyOf(request),
        InMemoryResponse.copyOf(response),
        limit);
  }

  private static @Nullable HandlerMethodReturnValueHandlerComposite returnValueHandlers(
      @Nullable WebApplicationContext context) {
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

  /** The resolvers {@code DispatcherServlet} detects: every bean of the type, in order. */
  private static @Nullable List<HandlerExceptionResolver> exceptionResolvers(
      @Nullable WebApplicationContext context) {
    if (context == null) {
      return null;
    }
    List<HandlerExceptionResolver> resolvers =
        new ArrayList<>(
            BeanFactoryUtils.beansOfTypeIncludingAncestors(
                    context, HandlerExceptionResolver.class, true, false)
                .values());
    AnnotationAwareOrderComparator.sort(resolvers);
    return resolvers.isEmpty() ? null : List.copyOf(flattened(resolvers));
  }

  /**
   * {@code resolvers} with each composite (Spring MVC's own {@code handlerExceptionResolver} bean
   * is one) replaced by the resolvers it holds, in its order: so that what
   * {@code @ExceptionHandler} methods answered is told apart from what the resolvers after them
   * answered.
   */
  private static List<HandlerExceptionResolver> flattened(
      List<HandlerExceptionResolver> resolvers) {
    List<HandlerExceptionResolver> flat = new ArrayList<>();
    for (HandlerExceptionResolver resolver : resolvers) {
      if (resolver instanceof HandlerExceptionResolverComposite composite) {
        flat.addAll(flattened(composite.getExceptionResolvers()));
      } else {
        flat.add(resolver);
      }
    }
    return flat;
  }

  /**
   * The response for {@code value}, the async result, as it would have been written.
   *
   * @param listedHeaders the headers the endpoint lists to store
   */
  StoredResponse render(@Nullable Object value, List<String> listedHeaders) {
    InMemoryResponse response = leftAs.copy();
    HttpServletResponse servletResponse = response.proxy();
    ResponseStatus status = responseStatus(handler);
    if (status != null) {
      servletResponse.setStatus(status.code().value());
    }
    boolean rendered = handle(value, new AsyncResultType(handler, value), servletResponse);
    return captured(response, servletResponse, rendered, listedHeaders);
  }

  /**
   * The response for {@code failure}, the async work's exception, as {@code DispatcherServlet}
   * would have resolved it: by the first of the application's exception resolvers that handles it.
   * An error sent without a body ({@code sendError}, whose body an error page would have written)
   * is stored with a problem detail.
   *
   * @param listedHeaders the headers the endpoint lists to store
   * @return the response, or null if no resolver handles the failure (on time, a 500)
   * @throws UnresolvedFailure if the failure could not be resolved here (no resolvers known, one
   *     failed on the ended request, or an {@code @ExceptionHandler} declared for it answered
   *     nothing there): its status is not known
   */
  @Nullable StoredResponse renderFailure(Throwable failure, List<String> listedHeaders) {
    List<HandlerExceptionResolver> known = exceptionResolvers(context);
    if (known == null) {
      throw new UnresolvedFailure("no exception resolvers were found", null);
    }
    Exception exception =
        failure instanceof Exception e
            ? e
            : new ServletException("Handler dispatch failed: " + failure, failure);
    InMemoryResponse response = leftAs.copy();
    HttpServletResponse servletResponse = response.proxy();
    HttpServletRequest servletRequest = request.proxy();
    // as DispatcherServlet does: success and error responses may use different content types
    servletRequest.removeAttribute(HandlerMapping.PRODUCIBLE_MEDIA_TYPES_ATTRIBUTE);
    ModelAndView view = null;
    try {
      for (HandlerExceptionResolver resolver : known) {
        view = resolver.resolveException(servletRequest, servletResponse, handler, exception);
        if (view != null) {
          break;
        }
        if (resolver instanceof ExceptionHandlerExceptionResolver
            && anExceptionHandlerMaps(failure)) {
          // it logs and swallows what an @ExceptionHandler throws: one that read what the ended
          // request no longer has (the session, the body) answers nothing here, where on time it
          // mapped the failure (a 4xx: the send may have happened). What a later resolver would
          // answer (a @ResponseStatus on the failure's class, a last-resort 500) was never the
          // answer on time: the status is not known
          throw new UnresolvedFailure(
              "an @ExceptionHandler maps it but answered nothing on the ended request", null);
        }
      }
    } catch (RuntimeException e) {
      if (e instanceof UnresolvedFailure unresolved) {
        throw unresolved;
      }
      throw new UnresolvedFailure("an exception resolver failed", e);
    }
    if (view == null) {
      return null;
    }
    boolean rendered = view.isEmpty();
    if (view.getStatus() != null) {
      servletResponse.setStatus(view.getStatus().value());
    }
    if (rendered && response.errorSent() && StoredStatuses.isStored(response.status)) {
      // sendError: the error page would have written the body; a problem detail stands for it
      int status = response.status;
      response.errorHandled();
      ResponseEntity<?> problem =
          ResponseEntity.status(status).body(StoredStatuses.problemOf(failure, status));
      rendered = handle(problem, new AsyncResultType(handler, problem), servletResponse);
    }
    return captured(response, servletResponse, rendered, listedHeaders);
  }

  /**
   * Whether an {@code @ExceptionHandler} method of the handler's controller, or of a {@code
   * ControllerAdvice} bean that applies to it, is declared for {@code failure}.
   */
  private boolean anExceptionHandlerMaps(Throwable failure) {
    Class<?> controller = handler.getBeanType();
    if (new ExceptionHandlerMethodResolver(controller).resolveMethodByThrowable(failure) != null) {
      return true;
    }
    if (context == null) {
      return false;
    }
    for (ControllerAdviceBean advice : ControllerAdviceBean.findAnnotatedBeans(context)) {
      Class<?> type = advice.getBeanType();
      if (type != null
          && advice.isApplicableToBeanType(controller)
          && new ExceptionHandlerMethodResolver(type).resolveMethodByThrowable(failure) != null) {
        return true;
      }
    }
    return false;
  }

  /**
   * The response that work which outlived its request writes to from the request's end on ({@link
   * CapturingResponse#outlivedByItsWork}): the status and headers it sets there are those a result
   * is rendered from ({@link #render}), as they would have been on the request's response on time;
   * a body written there is dropped.
   */
  HttpServletResponse workResponse() {
    return leftAs.workResponse();
  }

  /** The status of the response as the handler left it when the work went async. */
  int statusLeft() {
    return leftAs.status;
  }

  /**
   * The response as the handler left it when the work went async (its status and the listed
   * headers), with no body stored: the answer of a stream that the server stopped under, which a
   * retry gets as {@code 422 response-not-stored}, never as a replay.
   *
   * @param listedHeaders the headers the endpoint lists to store
   */
  StoredResponse leftWithoutBody(List<String> listedHeaders) {
    return StoredResponse.capture(leftAs.copy().proxy(), null, listedHeaders);
  }

  /**
   * The response as the handler left it when the work went async (its status and the listed
   * headers), with {@code body}: the answer of a stream the starter took over and ran detached from
   * its request, which wrote that body ({@link AsyncWork#takeOverQueuedWork}).
   *
   * @param body what the stream wrote
   * @param listedHeaders the headers the endpoint lists to store
   */
  StoredResponse leftWithBody(byte[] body, List<String> listedHeaders) {
    return StoredResponse.capture(leftAs.copy().proxy(), body, listedHeaders);
  }

  /** Whether Spring MVC's return value handlers wrote {@code value} on {@code response}. */
  private boolean handle(
      @Nullable Object value, MethodParameter type, HttpServletResponse servletResponse) {
    HandlerMethodReturnValueHandlerComposite handlers = returnValueHandlers(context);
    if (handlers == null) {
      return false;
    }
    ServletWebRequest web = new ServletWebRequest(request.proxy(), servletResponse);
    ModelAndViewContainer model = new ModelAndViewContainer();
    try {
      handlers.handleReturnValue(value, type, model, web);
      return model.isRequestHandled();
    } catch (Exception e) {
      return false;
    }
  }

  private StoredResponse captured(
      InMemoryResponse response,
      HttpServletResponse servletResponse,
      boolean rendered,
      List<String> listedHeaders) {
    try {
      servletResponse.flushBuffer();
    } catch (IOException e) {
      rendered = false;
    }
    byte[] body = response.body.toByteArray();
    StoredResponse stored =
        StoredResponse.capture(
            servletResponse, rendered && body.length <= limit ? body : null, listedHeaders);
    return rendered ? stored : stored.withoutBody();
  }

  /**
   * The handler's {@code @ResponseStatus}, as Spring MVC reads it: the method's, else its class's.
   */
  private static @Nullable ResponseStatus responseStatus(HandlerMethod handler) {
    ResponseStatus status = handler.getMethodAnnotation(ResponseStatus.class);
    return status != null
        ? status
        : AnnotatedElementUtils.findMergedAnnotation(handler.getBeanType(), ResponseStatus.class);
  }

  /** A late failure whose status cannot be known here. */
  static final class UnresolvedFailure extends RuntimeException {
    private static final long serialVersionUID = 1L;

    UnresolvedFailure(String why, @Nullable Throwable cause) {
      super(why, cause);
    }
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
