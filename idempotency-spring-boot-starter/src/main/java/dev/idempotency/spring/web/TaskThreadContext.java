package dev.idempotency.spring.web;

import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.core.task.TaskDecorator;
import org.springframework.util.ReflectionUtils;
import org.springframework.web.context.request.NativeWebRequest;
import org.springframework.web.context.request.async.AsyncWebRequest;
import org.springframework.web.context.request.async.CallableProcessingInterceptor;
import org.springframework.web.context.request.async.WebAsyncManager;
import org.springframework.web.context.request.async.WebAsyncUtils;
import org.springframework.web.servlet.FrameworkServlet;

/**
 * The thread context that Spring MVC gives the thread running a request's {@code Callable}, given
 * again to the starter's thread that runs the work instead ({@link UninterruptedWork}: shielded
 * from Spring MVC's interrupt, or taken over when queued at a timeout or refused). Spring MVC gives
 * its task thread two things besides the work: the application's {@code TaskDecorator} of its async
 * executor wraps the task (Spring Boot applies its {@code TaskDecorator} beans to the {@code
 * applicationTaskExecutor}, Spring MVC's), and the request's registered {@code
 * CallableProcessingInterceptor}s run around the work ({@code CallableInterceptorChain}: {@code
 * preProcess} in order before it, {@code postProcess} in reverse after it, for those whose {@code
 * preProcess} ran). That is how an application's thread-locals get there: Spring Security's {@code
 * SecurityContextHolder} ({@code WebAsyncManagerIntegrationFilter} registers {@code
 * SecurityContextCallableProcessingInterceptor}, which captures the context in {@code
 * beforeConcurrentHandling}, sets it in {@code preProcess} and clears it in {@code postProcess}),
 * and whatever an application's decorator carries (a tenant, a Micrometer {@code
 * ContextPropagatingTaskDecorator}'s snapshot). Work that reads them after it sent (an audit line
 * with its caller) would otherwise fail on the starter's thread, its key released, and the retry
 * would send again (SPEC 1).
 *
 * <p>Why so, and not otherwise: copying known thread-locals (as the MDC, the locale and the request
 * attributes are) cannot reach an application's own; Micrometer context-propagation reaches only
 * what has a registered accessor, and is not on every classpath; running the interceptors again on
 * the starter's thread is what Spring MVC itself does on each thread that runs a task, so every
 * interceptor gets its {@code preProcess} and {@code postProcess} once on each thread that runs the
 * work (Spring MVC's task thread, which only waits for it, and the starter's), never twice on one.
 * {@code beforeConcurrentHandling} (called by Spring MVC on the request's thread, where it
 * captures) and {@code afterCompletion} (called by Spring MVC once per request when its async
 * processing completes) are Spring MVC's alone. Left out: the starter's own interceptor ({@link
 * AsyncTimeouts}, whose {@code postProcess} reports the result on Spring MVC's thread), and Spring
 * MVC's {@code FrameworkServlet} binding of the locale and request attributes, which rebuilds them
 * from the request (gone once taken-over work runs after its request ended): the starter binds
 * those itself ({@link UninterruptedWork}: the locale taken while the request is live, request
 * attributes of the run's own over the starter's request, which answers from its copy once the
 * request ended). {@code WebAsyncManager} has no public accessor of its registered interceptors, so
 * they are read from its field; where that is refused, none is run (as before), with one DEBUG
 * line.
 */
final class TaskThreadContext {

  /** Nothing: no interceptor, no decorator. */
  static final TaskThreadContext NONE = new TaskThreadContext(List.of(), null, null, null);

  private static final Logger log = LoggerFactory.getLogger(TaskThreadContext.class);

  private static final @Nullable Field INTERCEPTORS = interceptorsField();

  private final List<CallableProcessingInterceptor> interceptors;
  private final @Nullable NativeWebRequest request;
  private final @Nullable TaskDecorator decorator;
  private volatile @Nullable Callable<?> task;
  // what decoratingHere set up on the request's thread; null for a context it did not make
  private final @Nullable RequestThreadSetUp setUp;

  private TaskThreadContext(
      List<CallableProcessingInterceptor> interceptors,
      @Nullable NativeWebRequest request,
      @Nullable TaskDecorator decorator,
      @Nullable RequestThreadSetUp setUp) {
    this.interceptors = interceptors;
    this.request = request;
    this.decorator = decorator;
    this.setUp = setUp;
  }

  /**
   * The context of {@code request}'s async work: its registered interceptors as they are now (taken
   * on the request's thread, as the handler returns the work, just before Spring MVC starts it),
   * and {@code decorator}.
   *
   * @param request the request whose handler returned the work
   * @param decorator the application's task decorator, or null
   */
  static TaskThreadContext of(NativeWebRequest request, @Nullable TaskDecorator decorator) {
    WebAsyncManager manager = WebAsyncUtils.getAsyncManager(request);
    AsyncWebRequest asyncRequest = manager.getAsyncWebRequest();
    List<CallableProcessingInterceptor> registered = registered(manager);
    if (registered.isEmpty() && decorator == null) {
      return NONE;
    }
    // Spring MVC hands its interceptors the request's AsyncWebRequest
    return new TaskThreadContext(
        registered, asyncRequest != null ? asyncRequest : request, decorator, null);
  }

  /**
   * The task as Spring MVC hands it to the interceptors (the shielded {@code Callable} it runs):
   * given to them here too.
   */
  void task(Callable<?> task) {
    if (!interceptors.isEmpty()) { // NONE is shared, and holds nothing
      this.task = task;
    }
  }

  /** Whether the application has a task decorator, which {@link #decorate} applies. */
  boolean decorates() {
    return decorator != null;
  }

  /**
   * {@code runnable}, decorated by the application's task decorator, if any: the first time, for a
   * context {@link #decoratingHere} made, by the wrapping taken on the thread that made it; else on
   * this thread.
   */
  Runnable decorate(Runnable runnable) {
    TaskDecorator own = decorator;
    if (own == null) {
      return runnable;
    }
    Runnable wrapped = setUp != null ? setUp.wrappedFor(runnable) : null;
    return wrapped != null ? wrapped : own.decorate(runnable);
  }

  /**
   * A copy of this context, made on the request's thread, for the stages of a handler's own {@code
   * CompletionStage} or {@code DeferredResult} that the starter may run later on the thread of
   * whatever completes it (an application's thread, another request's): the request's interceptors
   * get their {@code beforeConcurrentHandling} now, on the request's thread, as Spring MVC calls it
   * on the thread that hands it a {@code Callable} (where Spring Security's interceptor takes the
   * caller's {@code SecurityContext}), and the application's decorator wraps a task now, on the
   * request's thread (where its wrapping takes the request's thread-locals), which the first task
   * {@link #decorate}d later runs in. A copy that never runs that task ends it with {@link
   * #unused}, so every task the decorator wraps runs once. A failing {@code
   * beforeConcurrentHandling} is logged at DEBUG: the handler's own answer is not Spring MVC's to
   * refuse here, and its interceptor's {@code preProcess} still runs later.
   */
  TaskThreadContext decoratingHere() {
    if (this == NONE) {
      return NONE;
    }
    return new TaskThreadContext(
        interceptors,
        request,
        decorator,
        RequestThreadSetUp.here(interceptors, request, decorator));
  }

  /**
   * The task the decorator wrapped on the request's thread ({@link #decoratingHere}), if no task
   * ran in it: run now with nothing to do, so that a decorator that takes something when it
   * decorates gives it back. A failure of it is logged at DEBUG.
   */
  void unused() {
    if (setUp != null) {
      setUp.unused();
    }
  }

  /**
   * Runs {@code work} on this thread as Spring MVC's {@code CallableInterceptorChain} runs a task:
   * each interceptor's {@code preProcess} in order (the first that fails ends it: the work does not
   * run, its failure is the result), the work, then {@code postProcess} in reverse for each whose
   * {@code preProcess} ran, each given the work's outcome. Once the work ran, its own outcome
   * (result or failure) is returned, whatever a {@code postProcess} does: a {@code postProcess}
   * failure is logged at WARN (its class only) and the others still run; recorded as the work's
   * outcome it would release the key of a work that sent, and the retry would send again (SPEC 1).
   *
   * @return the work's result
   * @throws Exception the work's failure, or a failing {@code preProcess}'s
   */
  @Nullable Object call(Callable<?> work) throws Exception {
    if (interceptors.isEmpty() || request == null) {
      return work.call();
    }
    NativeWebRequest webRequest = request;
    Callable<?> handedToSpring = setUp != null ? setUp.task() : task;
    Callable<?> asSpringSees = handedToSpring != null ? handedToSpring : work;
    int entered = 0;
    @Nullable Object result = null;
    @Nullable Throwable failure = null;
    try {
      for (CallableProcessingInterceptor interceptor : interceptors) {
        interceptor.preProcess(webRequest, asSpringSees);
        entered++;
      }
      result = work.call();
    } catch (Throwable e) {
      failure = e;
    }
    @Nullable Object passed = failure != null ? failure : result;
    @Nullable Throwable postFailure = null;
    for (int i = entered - 1; i >= 0; i--) {
      try {
        interceptors.get(i).postProcess(webRequest, asSpringSees, passed);
      } catch (Throwable e) {
        if (postFailure == null) {
          postFailure = e; // the result, as in Spring MVC's chain; the others still run
        } else {
          log.trace("Ignoring a later failure of a postProcess", e);
        }
      }
    }
    if (postFailure != null && entered == interceptors.size()) {
      // the work ran: its own outcome is the send's, never the interceptor's (which, taken as the
      // result, would release the key of a work that sent and the retry would send again)
      log.warn(
          "A callable interceptor's postProcess failed after an idempotent endpoint's work ended"
              + " on the starter's thread; the work's own outcome is kept: {}",
          postFailure.getClass().getName());
      log.debug("The interceptor's failure", postFailure);
    } else if (postFailure != null && failure == null) {
      throw asException(postFailure);
    }
    if (failure != null) {
      throw asException(failure);
    }
    return result;
  }

  private static Exception asException(Throwable failure) {
    if (failure instanceof Exception exception) {
      return exception;
    }
    if (failure instanceof Error error) {
      throw error;
    }
    return new ExecutionException(failure);
  }

  /**
   * The application's interceptors registered on {@code manager}, in their order, without the
   * starter's own and Spring MVC's binding of the locale and request attributes.
   */
  @SuppressWarnings("unchecked")
  private static List<CallableProcessingInterceptor> registered(WebAsyncManager manager) {
    Field field = INTERCEPTORS;
    if (field == null) {
      return List.of();
    }
    Object value;
    try {
      value = ReflectionUtils.getField(field, manager);
    } catch (RuntimeException e) {
      return List.of();
    }
    if (!(value instanceof Map<?, ?> map) || map.isEmpty()) {
      return List.of();
    }
    CallableProcessingInterceptor binding =
        manager.getCallableInterceptor(FrameworkServlet.class.getName());
    List<CallableProcessingInterceptor> kept = new ArrayList<>();
    for (Object interceptor : ((Map<Object, Object>) map).values()) {
      if (interceptor instanceof CallableProcessingInterceptor callable
          && callable != binding
          && !(callable instanceof AsyncTimeouts)) {
        kept.add(callable);
      }
    }
    return List.copyOf(kept);
  }

  private static @Nullable Field interceptorsField() {
    Field field = ReflectionUtils.findField(WebAsyncManager.class, "callableInterceptors");
    if (field == null || !Map.class.isAssignableFrom(field.getType())) {
      log.debug(
          "WebAsyncManager has no callableInterceptors map: the application's callable"
              + " interceptors do not run on the starter's threads");
      return null;
    }
    try {
      field.setAccessible(true);
      return field;
    } catch (RuntimeException e) {
      log.debug(
          "WebAsyncManager's callable interceptors cannot be read: the application's callable"
              + " interceptors do not run on the starter's threads",
          e);
      return null;
    }
  }
}
