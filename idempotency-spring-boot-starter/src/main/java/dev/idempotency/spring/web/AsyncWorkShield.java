package dev.idempotency.spring.web;

import jakarta.servlet.DispatcherType;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.lang.reflect.Field;
import java.util.List;
import java.util.concurrent.Callable;
import org.jspecify.annotations.Nullable;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.BeanFactoryAware;
import org.springframework.beans.factory.DisposableBean;
import org.springframework.beans.factory.ListableBeanFactory;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.core.MethodParameter;
import org.springframework.core.ReactiveAdapterRegistry;
import org.springframework.core.task.AsyncTaskExecutor;
import org.springframework.core.task.TaskDecorator;
import org.springframework.core.task.support.CompositeTaskDecorator;
import org.springframework.http.ResponseEntity;
import org.springframework.util.ReflectionUtils;
import org.springframework.web.context.request.NativeWebRequest;
import org.springframework.web.context.request.RequestAttributes;
import org.springframework.web.context.request.ServletRequestAttributes;
import org.springframework.web.context.request.ServletWebRequest;
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
 * return value handler of each of the application's {@link RequestMappingHandlerAdapter}s is
 * wrapped (Spring MVC's own, the application's added through {@code
 * WebMvcConfigurer.addReturnValueHandlers}, and handlers that another bean post-processor, such as
 * a tracing library's, has decorated so that their class no longer shows what they handle). The
 * wrapper hands the handler a shielded copy of a guarded request's {@code Callable}, {@code
 * WebAsyncTask} (of any subclass it becomes a plain one with the same timeout, executor and
 * callbacks), {@code StreamingResponseBody}, or {@code ResponseEntity} of a {@code
 * StreamingResponseBody}; a value already shielded, other requests, and other values pass as they
 * are. A wrapped {@code AsyncHandlerMethodReturnValueHandler} stays one.
 *
 * <p>Handlers are wrapped when an adapter bean is initialized, and again, in every adapter bean,
 * once all singletons exist: a handler that a later post-processor (or a {@code
 * SmartInitializingSingleton} before this one) put into a list is wrapped then; a handler already
 * wrapped is kept as it is. A handler put into a list later still (by a listener of the context's
 * refresh, say) is not wrapped: for it the {@link IdempotentEndpointAdvisor} shields the value the
 * handler method returns, where its declared type accepts the shielded copy, and a {@code Callable}
 * or a {@code StreamingResponseBody} returned behind another declared type ({@code Serializable})
 * is not shielded. Created by the Spring Boot auto-configuration.
 */
public final class AsyncWorkShield
    implements BeanPostProcessor, SmartInitializingSingleton, BeanFactoryAware, DisposableBean {

  private static final @Nullable Field TASK_TIMEOUT_CALLBACK = taskField("timeoutCallback");
  private static final @Nullable Field TASK_ERROR_CALLBACK = taskField("errorCallback");
  private static final @Nullable Field TASK_COMPLETION_CALLBACK = taskField("completionCallback");

  private final UninterruptedWork work = new UninterruptedWork();

  private @Nullable ListableBeanFactory beanFactory;

  // the application's task decorator, once looked up (its one element null if there is none)
  private volatile TaskDecorator @Nullable [] decorator;

  /** Created by the auto-configuration. */
  public AsyncWorkShield() {}

  /**
   * Keeps the bean factory, to find every adapter once all singletons exist.
   *
   * @param beanFactory the bean factory
   */
  @Override
  public void setBeanFactory(BeanFactory beanFactory) {
    if (beanFactory instanceof ListableBeanFactory listable) {
      this.beanFactory = listable;
    }
  }

  /**
   * Wraps every return value handler of a Spring MVC {@link RequestMappingHandlerAdapter}, once it
   * has made them; any other bean is returned as it is.
   *
   * @param bean the bean
   * @param beanName its name
   * @return the bean
   */
  @Override
  public Object postProcessAfterInitialization(Object bean, String beanName) {
    if (bean instanceof RequestMappingHandlerAdapter adapter) {
      shieldHandlers(adapter);
    }
    return bean;
  }

  /**
   * Wraps the return value handlers not wrapped yet of every {@link RequestMappingHandlerAdapter}
   * singleton of this context: those put into a list after the adapter was initialized, by a
   * post-processor that ran after this one or a {@code SmartInitializingSingleton} that ran before.
   * An ancestor context's adapters are left to its own shield, whose threads live as long as it.
   */
  @Override
  public void afterSingletonsInstantiated() {
    if (beanFactory != null) {
      beanFactory
          .getBeansOfType(RequestMappingHandlerAdapter.class, false, false)
          .values()
          .forEach(this::shieldHandlers);
    }
  }

  /** Wraps the adapter's handlers that are not wrapped yet; a list all wrapped is left as it is. */
  private void shieldHandlers(RequestMappingHandlerAdapter adapter) {
    List<HandlerMethodReturnValueHandler> handlers = adapter.getReturnValueHandlers();
    if (handlers != null && !handlers.stream().allMatch(Shielding.class::isInstance)) {
      adapter.setReturnValueHandlers(handlers.stream().map(this::shielding).toList());
    }
  }

  private HandlerMethodReturnValueHandler shielding(HandlerMethodReturnValueHandler handler) {
    if (handler instanceof Shielding) {
      return handler;
    }
    return handler instanceof AsyncHandlerMethodReturnValueHandler async
        ? new AsyncShielding(async)
        : new Shielding(handler);
  }

  /**
   * What a guarded request's handler method returned, shielded already if it is async work that
   * Spring MVC will run and the method's declared type accepts the shielded copy; else the value
   * itself. The last line of defence, for a return value handler put into an adapter's list after
   * this shield last looked at it; the wrapped handlers pass a value shielded here as it is, so
   * nothing is shielded twice.
   *
   * @param returned what the handler method returned
   * @param declared the method's declared return type
   * @param request the request's attributes (made into a web request only for async work)
   * @return the shielded copy, or {@code returned}
   */
  @Nullable Object shieldedReturn(
      @Nullable Object returned, Class<?> declared, ServletRequestAttributes request) {
    Class<?> copyType = copyType(returned);
    if (copyType == null || !declared.isAssignableFrom(copyType)) {
      return returned; // not async work, or the copy would not fit the declared type
    }
    Object copy =
        shielded(returned, new ServletWebRequest(request.getRequest(), request.getResponse()));
    return declared.isInstance(copy) ? copy : returned;
  }

  /** The type of a shielded copy of {@code value}, or null if Spring MVC will not run it. */
  private static @Nullable Class<?> copyType(@Nullable Object value) {
    if (reactive(value)) {
      return null; // served as a reactive value, even if a Callable too
    }
    if (value instanceof Callable<?>) {
      return Callable.class;
    }
    if (value instanceof WebAsyncTask<?>) {
      return WebAsyncTask.class;
    }
    if (value instanceof StreamingResponseBody) {
      return StreamingResponseBody.class;
    }
    if (value instanceof ResponseEntity<?> entity
        && entity.getBody() instanceof StreamingResponseBody) {
      return ResponseEntity.class;
    }
    return null;
  }

  /**
   * What follows {@code call}'s async outcomes that Spring MVC will not follow, with {@code
   * request}'s thread context taken now, on the request's thread ({@link
   * UninterruptedWork#follower}).
   *
   * @param ownStage whether the handler returned its own stage (no {@code Callable})
   */
  AsyncWork.Follower follower(EndpointCall call, NativeWebRequest request, boolean ownStage) {
    return work.follower(call, contextOf(request), ownStage);
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
            instanceof EndpointCall call)
        || reactive(value)) {
      return value;
    }
    if (value instanceof Callable<?> callable) {
      return work.shield(callable, call, contextOf(request));
    }
    if (value instanceof ShieldedTask) {
      return value;
    }
    if (value instanceof WebAsyncTask<?> task) {
      return shielded(task, request, call);
    }
    if (value instanceof StreamingResponseBody body) {
      return work.shield(body, call, contextOf(request));
    }
    if (value instanceof ResponseEntity<?> entity
        && entity.getBody() instanceof StreamingResponseBody body) {
      StreamingResponseBody shielded = work.shield(body, call, contextOf(request));
      return shielded == body ? entity : IdempotentEndpointAdvisor.withBody(entity, shielded);
    }
    return value;
  }

  /**
   * Whether Spring MVC serves {@code value} as a reactive type: its reactive return value handler
   * ({@code ResponseBodyEmitterReturnValueHandler}), which comes before the {@code Callable} one,
   * takes any value whose class has an adapter, as Reactor's scalar {@code Mono}s ({@code
   * Mono.just}, {@code Mono.fromCallable}, {@code Mono.fromSupplier}) that are {@code Callable}s
   * too. It subscribes them on the request's thread, never on its async executor, so there is no
   * interrupt to shield them from; a shielded {@code Callable} in their place it refuses
   * ("Unexpected return value type"): a 500 after the send, the key released, and the retry sends
   * again (SPEC 1). Spring's shared adapter registry is the one Spring MVC uses unless the
   * application gives its adapter another.
   */
  private static boolean reactive(@Nullable Object value) {
    return value != null
        && ReactiveAdapterRegistry.getSharedInstance().getAdapter(value.getClass()) != null;
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
        new ShieldedTask(
            task, work.shield((Callable<Object>) task.getCallable(), call, contextOf(request)));
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

  /**
   * What Spring MVC would give the thread that runs {@code request}'s async work, for the starter's
   * thread that runs it instead ({@link TaskThreadContext}): the request's callable interceptors,
   * and the application's task decorator.
   */
  private TaskThreadContext contextOf(NativeWebRequest request) {
    return TaskThreadContext.of(request, decorator());
  }

  /**
   * The application's {@code TaskDecorator} beans, as Spring Boot applies them to its {@code
   * applicationTaskExecutor}, which Spring MVC's async support uses: one as it is, several composed
   * in their order (as Spring Boot 4 does; Spring Boot 3.5 applies only a unique one); null if
   * there is none. Looked up once, at the first guarded async work. An application that gives
   * Spring MVC an executor of its own ({@code WebMvcConfigurer.configureAsyncSupport}) with another
   * decorator is not seen: Spring MVC's executor does not expose its decorator.
   */
  private @Nullable TaskDecorator decorator() {
    TaskDecorator[] found = decorator;
    if (found == null) {
      TaskDecorator own = null;
      if (beanFactory != null) {
        List<TaskDecorator> decorators =
            beanFactory.getBeanProvider(TaskDecorator.class).orderedStream().toList();
        own =
            decorators.isEmpty()
                ? null
                : decorators.size() == 1
                    ? decorators.get(0)
                    : new CompositeTaskDecorator(decorators);
      }
      found = new TaskDecorator[] {own};
      decorator = found;
    }
    return found[0];
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
      try {
        handler.handleReturnValue(
            shielded(returnValue, webRequest), returnType, mavContainer, webRequest);
      } catch (Exception | Error e) {
        valueNotWritten(webRequest);
        throw e;
      }
    }
  }

  /**
   * A return value handler failed in a guarded request's async dispatch: the value it got is the
   * result of the handler's async work, which ran to its end (a failed work's dispatch throws
   * before any return value handler), so the call is not released ({@link
   * EndpointCall#valueNotWritten}).
   */
  private static void valueNotWritten(NativeWebRequest request) {
    HttpServletRequest servletRequest = request.getNativeRequest(HttpServletRequest.class);
    if (servletRequest != null
        && servletRequest.getDispatcherType() == DispatcherType.ASYNC
        && servletRequest.getAttribute(EndpointCall.ATTRIBUTE) instanceof EndpointCall call) {
      call.valueNotWritten();
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
