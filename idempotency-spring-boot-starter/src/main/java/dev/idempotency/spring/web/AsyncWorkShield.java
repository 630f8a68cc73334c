package dev.idempotency.spring.web;

import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.lang.reflect.Field;
import java.util.List;
import java.util.concurrent.Callable;
import org.jspecify.annotations.Nullable;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.DisposableBean;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.core.MethodParameter;
import org.springframework.core.task.AsyncTaskExecutor;
import org.springframework.http.ResponseEntity;
import org.springframework.util.ReflectionUtils;
import org.springframework.web.context.request.NativeWebRequest;
import org.springframework.web.context.request.RequestAttributes;
import org.springframework.web.context.request.async.CallableProcessingInterceptor;
import org.springframework.web.context.request.async.WebAsyncTask;
import org.springframework.web.context.request.async.WebAsyncUtils;
import org.springframework.web.method.support.AsyncHandlerMethodReturnValueHandler;
import org.springframework.web.method.support.HandlerMethodReturnValueHandler;
import org.springframework.web.method.support.ModelAndViewContainer;
import org.springframework.web.servlet.mvc.method.annotation.RequestMappingHandlerAdapter;
import org.springframework.web.servlet.mvc.method.annotation.StreamingResponseBody;

/**
 * Shields the work of an {@link IdempotentEndpoint} that Spring MVC runs on its async executor (a
 * {@code Callable}, a {@code WebAsyncTask}'s callable, a {@code StreamingResponseBody}) from the
 * interrupt with which Spring MVC cancels it at a container async timeout ({@link
 * UninterruptedWork}): the send goes on, its outcome is recorded and the retry gets it replayed. A
 * {@code WebAsyncTask}'s own {@code onTimeout} answer goes to the client, and the key stays claimed
 * until the task's work ends ({@link AsyncTimeouts#ownTimeout}), as at any timeout.
 *
 * <p>Spring MVC picks the return value handler by the runtime class of the value the handler method
 * returned, whatever its declared type: a {@code Callable} behind a declared {@code Serializable}
 * runs as async work too. So the work is shielded where Spring MVC hands the value over: every
 * return value handler of each of the application's {@link RequestMappingHandlerAdapter}s, once
 * initialized, is wrapped (Spring MVC's own, the application's added through {@code
 * WebMvcConfigurer.addReturnValueHandlers}, and handlers that another bean post-processor, such as
 * a tracing library's, has decorated so that their class no longer shows what they handle). The
 * wrapper hands the handler a shielded copy of a guarded request's {@code Callable}, {@code
 * WebAsyncTask} (of any subclass it becomes a plain one with the same timeout, executor and
 * callbacks), {@code StreamingResponseBody}, or {@code ResponseEntity} of a {@code
 * StreamingResponseBody}; a value already shielded, other requests, and other values pass as they
 * are. A wrapped {@code AsyncHandlerMethodReturnValueHandler} stays one. Created by the Spring Boot
 * auto-configuration.
 */
public final class AsyncWorkShield implements BeanPostProcessor, DisposableBean {

  private static final @Nullable Field TASK_TIMEOUT_CALLBACK = taskField("timeoutCallback");
  private static final @Nullable Field TASK_ERROR_CALLBACK = taskField("errorCallback");
  private static final @Nullable Field TASK_COMPLETION_CALLBACK = taskField("completionCallback");

  private final UninterruptedWork work = new UninterruptedWork();

  /** Created by the auto-configuration. */
  public AsyncWorkShield() {}

  /**
   * Wraps every return value handler of a Spring MVC {@link RequestMappingHandlerAdapter}, once it
   * has made them (once per adapter); any other bean is returned as it is.
   *
   * @param bean the bean
   * @param beanName its name
   * @return the bean
   */
  @Override
  public Object postProcessAfterInitialization(Object bean, String beanName) {
    if (bean instanceof RequestMappingHandlerAdapter adapter) {
      List<HandlerMethodReturnValueHandler> handlers = adapter.getReturnValueHandlers();
      if (handlers != null && handlers.stream().noneMatch(Shielding.class::isInstance)) {
        adapter.setReturnValueHandlers(handlers.stream().map(this::shielding).toList());
      }
    }
    return bean;
  }

  private HandlerMethodReturnValueHandler shielding(HandlerMethodReturnValueHandler handler) {
    return handler instanceof AsyncHandlerMethodReturnValueHandler async
        ? new AsyncShielding(async)
        : new Shielding(handler);
  }

  /** Stops the threads that ran shielded work; work still running goes on. */
  @Override
  public void destroy() {
    work.shutdown();
  }

  /**
   * The value Spring MVC will run as async work, shielded, if the request is a guarded one; else
   * the value itself.
   */
  private @Nullable Object shielded(@Nullable Object value, NativeWebRequest request) {
    if (!(request.getAttribute(EndpointCall.ATTRIBUTE, RequestAttributes.SCOPE_REQUEST)
        instanceof EndpointCall call)) {
      return value;
    }
    if (value instanceof Callable<?> callable) {
      return work.shield(callable, call);
    }
    if (value instanceof ShieldedTask) {
      return value;
    }
    if (value instanceof WebAsyncTask<?> task) {
      return shielded(task, request, call);
    }
    if (value instanceof StreamingResponseBody body) {
      return work.shield(body, call);
    }
    if (value instanceof ResponseEntity<?> entity
        && entity.getBody() instanceof StreamingResponseBody body) {
      StreamingResponseBody shielded = work.shield(body, call);
      return shielded == body ? entity : IdempotentEndpointAdvisor.withBody(entity, shielded);
    }
    return value;
  }

  /**
   * A plain task with {@code task}'s timeout, executor and callbacks, whose callable is {@code
   * task}'s shielded, and whose own timeout callback, if any, keeps the key claimed. {@code
   * WebAsyncTask} offers no getter for its callbacks, so they are read reflectively; where that is
   * refused, the task is left as it is.
   */
  @SuppressWarnings("unchecked")
  private WebAsyncTask<?> shielded(
      WebAsyncTask<?> task, NativeWebRequest request, EndpointCall call) {
    if (TASK_TIMEOUT_CALLBACK == null
        || TASK_ERROR_CALLBACK == null
        || TASK_COMPLETION_CALLBACK == null) {
      return task;
    }
    Object ownTimeout = ReflectionUtils.getField(TASK_TIMEOUT_CALLBACK, task);
    Object ownError = ReflectionUtils.getField(TASK_ERROR_CALLBACK, task);
    Object ownCompletion = ReflectionUtils.getField(TASK_COMPLETION_CALLBACK, task);
    ShieldedTask shielded =
        new ShieldedTask(task, work.shield((Callable<Object>) task.getCallable(), call));
    HttpServletRequest servletRequest = request.getNativeRequest(HttpServletRequest.class);
    HttpServletResponse servletResponse = request.getNativeResponse(HttpServletResponse.class);
    if (ownTimeout instanceof Callable<?> callback
        && servletRequest != null
        && servletResponse != null
        && WebAsyncUtils.getAsyncManager(request).getCallableInterceptor(AsyncTimeouts.KEY)
            instanceof AsyncTimeouts timeouts) {
      shielded.onTimeout(
          () -> {
            Object early = timeouts.ownTimeout(servletRequest, servletResponse);
            return early != CallableProcessingInterceptor.RESULT_NONE ? early : callback.call();
          });
    } else if (ownTimeout instanceof Callable<?> callback) {
      shielded.onTimeout((Callable<Object>) callback);
    }
    if (ownError instanceof Callable<?> callback) {
      shielded.onError((Callable<Object>) callback);
    }
    if (ownCompletion instanceof Runnable callback) {
      shielded.onCompletion(callback);
    }
    return shielded;
  }

  private static @Nullable Field taskField(String name) {
    Field field = ReflectionUtils.findField(WebAsyncTask.class, name);
    if (field == null) {
      return null;
    }
    try {
      field.setAccessible(true);
      return field;
    } catch (RuntimeException e) {
      return null;
    }
  }

  /**
   * The application's task with its callable shielded: its timeout and executor are the
   * application's task's own (a subclass may compute them), and so is the bean factory that Spring
   * MVC gives it to look an executor up by name.
   */
  private static final class ShieldedTask extends WebAsyncTask<Object> {
    private final WebAsyncTask<?> own;

    ShieldedTask(WebAsyncTask<?> own, Callable<Object> shielded) {
      super(shielded);
      this.own = own;
    }

    @Override
    public @Nullable Long getTimeout() {
      return own.getTimeout();
    }

    @Override
    public @Nullable AsyncTaskExecutor getExecutor() {
      return own.getExecutor();
    }

    @Override
    public void setBeanFactory(BeanFactory beanFactory) {
      own.setBeanFactory(beanFactory);
    }
  }

  /** A return value handler, given guarded requests' async work shielded. */
  private class Shielding implements HandlerMethodReturnValueHandler {
    private final HandlerMethodReturnValueHandler handler;

    Shielding(HandlerMethodReturnValueHandler handler) {
      this.handler = handler;
    }

    @Override
    public boolean supportsReturnType(MethodParameter returnType) {
      return handler.supportsReturnType(returnType);
    }

    @Override
    public void handleReturnValue(
        @Nullable Object returnValue,
        MethodParameter returnType,
        ModelAndViewContainer mavContainer,
        NativeWebRequest webRequest)
        throws Exception {
      handler.handleReturnValue(
          shielded(returnValue, webRequest), returnType, mavContainer, webRequest);
    }
  }

  /** An async return value handler, given guarded requests' async work shielded. */
  private final class AsyncShielding extends Shielding
      implements AsyncHandlerMethodReturnValueHandler {
    private final AsyncHandlerMethodReturnValueHandler async;

    AsyncShielding(AsyncHandlerMethodReturnValueHandler handler) {
      super(handler);
      this.async = handler;
    }

    @Override
    public boolean isAsyncReturnValue(@Nullable Object returnValue, MethodParameter returnType) {
      return async.isAsyncReturnValue(returnValue, returnType);
    }
  }
}
