package dev.idempotency.spring.web;

import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.atomic.AtomicReference;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.core.task.TaskDecorator;
import org.springframework.web.context.request.NativeWebRequest;
import org.springframework.web.context.request.async.CallableProcessingInterceptor;

/**
 * What a {@link TaskThreadContext#decoratingHere} context set up on the request's thread, for the
 * stages of a handler's own {@code CompletionStage} or {@code DeferredResult} that the starter may
 * run later on another thread: the task the request's interceptors were handed there (in {@code
 * beforeConcurrentHandling}), which they are handed again around each run, and a task the
 * application's decorator wrapped there, which the first task decorated later runs in. One per
 * request's handler result; safe to use from any thread.
 */
final class RequestThreadSetUp {

  /** Under TaskThreadContext's logger, as before this class was split out of it. */
  private static final Logger log = LoggerFactory.getLogger(TaskThreadContext.class);

  private final @Nullable Callable<?> task;
  // the task the decorator wrapped on the request's thread: null if none, or once taken
  private final AtomicReference<@Nullable Runnable> wrapped = new AtomicReference<>();
  // what the first task decorated later runs in it
  private final AtomicReference<@Nullable Runnable> toRun = new AtomicReference<>();

  private RequestThreadSetUp(@Nullable Callable<?> task) {
    this.task = task;
  }

  /**
   * Set up on this thread, the request's: {@code interceptors} get their {@code
   * beforeConcurrentHandling} with a task that stands for the starter's later runs (a failing one
   * is logged at DEBUG), and {@code decorator}, if any, wraps a task now; if it refuses (throws an
   * exception or an {@code Error} other than a {@code VirtualMachineError}), with a WARN, none is
   * wrapped here and a later task is decorated on its own thread. Throws only a {@code
   * VirtualMachineError}.
   *
   * @param request the request as Spring MVC hands it to its interceptors, or null (then none is
   *     called)
   */
  static RequestThreadSetUp here(
      List<CallableProcessingInterceptor> interceptors,
      @Nullable NativeWebRequest request,
      @Nullable TaskDecorator decorator) {
    @Nullable Callable<Object> asSpringSees = null;
    if (!interceptors.isEmpty() && request != null) {
      Callable<Object> placeholder =
          () -> {
            throw new IllegalStateException("the starter runs a handler's later stage itself");
          };
      asSpringSees = placeholder;
      for (CallableProcessingInterceptor interceptor : interceptors) {
        try {
          interceptor.beforeConcurrentHandling(request, placeholder);
        } catch (Exception | LinkageError e) {
          log.debug("A callable interceptor's beforeConcurrentHandling failed", e);
        }
      }
    }
    RequestThreadSetUp setUp = new RequestThreadSetUp(asSpringSees);
    if (decorator != null) {
      try {
        setUp.wrapped.set(
            decorator.decorate(
                () -> {
                  Runnable next = setUp.toRun.getAndSet(null);
                  if (next != null) {
                    next.run();
                  }
                }));
      } catch (VirtualMachineError fatal) {
        throw fatal;
      } catch (RuntimeException | Error refused) {
        // The handler returned its stage, whose send may be under way: a failure thrown from here
        // (an exception, or an Error such as an assert's AssertionError; not the JVM's own) would
        // answer 500 and release the key, and the retry would send again (SPEC 1). Nothing
        // is wrapped here, so a later task is decorated on the thread that completes the stage:
        // the decorator still decides for it (it may refuse again there; that task then does not
        // run, and its call ends as a failure before it sent), rather than it running outside
        // whatever the decorator guards (a bulkhead) without the decorator ever seeing it.
        log.warn(
            "The application's task decorator failed on the request's thread after an idempotent"
                + " endpoint's handler returned its own stage; a later stage is decorated on the"
                + " thread that completes it: {}",
            refused.getClass().getName());
        log.debug("The task decorator's failure", refused);
      }
    }
    return setUp;
  }

  /**
   * The task the interceptors were handed on the request's thread, to hand them again; null if none
   * was (no interceptor, or no request).
   */
  @Nullable Callable<?> task() {
    return task;
  }

  /**
   * The task the decorator wrapped on the request's thread, which runs {@code runnable}, the first
   * time this is asked; null after that, or if no decorator wrapped one (then {@code runnable} is
   * decorated on its own thread).
   */
  @Nullable Runnable wrappedFor(Runnable runnable) {
    Runnable here = wrapped.getAndSet(null);
    if (here != null) {
      toRun.set(runnable);
    }
    return here;
  }

  /**
   * The task the decorator wrapped on the request's thread, if no task ran in it: run now with
   * nothing to do, so that a decorator that takes something when it decorates gives it back. A
   * failure of it is logged at DEBUG.
   */
  void unused() {
    Runnable here = wrapped.getAndSet(null);
    if (here != null) {
      try {
        here.run();
      } catch (RuntimeException | Error e) {
        log.debug("The task the application's decorator wrapped ended with a failure", e);
      }
    }
  }
}
