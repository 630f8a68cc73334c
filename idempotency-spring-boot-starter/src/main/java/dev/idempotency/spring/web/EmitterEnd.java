package dev.idempotency.spring.web;

import java.lang.reflect.Field;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Collections;
import java.util.Deque;
import java.util.IdentityHashMap;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Lock;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.web.servlet.mvc.method.annotation.ResponseBodyEmitter;

/**
 * How the application ends an emitter ({@code ResponseBodyEmitter}, {@code SseEmitter}) whose
 * request was cut short before it sent anything (a container async timeout, or the server stopped
 * under it). Once Spring MVC times an emitter out it marks it complete and sets the result it waits
 * for, so the application's later {@code complete} or {@code completeWithError} reaches only Spring
 * MVC's handler of the emitter, which ignores it, and a later {@code send} fails in the emitter
 * itself. So the starter puts itself between the emitter and that handler (the emitter's
 * package-private {@code Handler}, reached by reflection, as the advisor reaches a {@code
 * DeferredResult}'s fields), as soon as Spring MVC started the emitter (or, at the latest, before
 * Spring MVC's timeout handling runs): it hears every send that reaches the response, and the
 * application's end of the emitter, which it passes on unchanged. Where that is refused (another
 * Spring Framework, a module system that closes the package), it observes nothing, and the stream
 * is recorded at the cut as before.
 *
 * <p>The end ({@link #whenEnded}) is the application's own failure ({@code completeWithError} with
 * an error of its own) or null, for anything that may follow a send: a normal end, or a failure
 * thrown by the emitter's {@code send} (one after the cut, say, which never reaches the response:
 * its provider call happened), as itself or as a cause or suppressed exception, or one whose origin
 * cannot be told (an exception without a stack trace). An end called from Spring MVC's own
 * callbacks (the application's {@code onTimeout}, {@code onError} or {@code onCompletion}, which
 * run as the request times out or ends, while its work may still send) is not the work's end: it is
 * passed on, and the end still awaited.
 *
 * <p>An emitter Spring MVC never got (the work that returned it outlived its request) is followed
 * the same way: the starter starts it itself, with an observer and no response behind it ({@link
 * #follow}).
 */
final class EmitterEnd implements InvocationHandler {

  private static final Logger log = LoggerFactory.getLogger(EmitterEnd.class);

  private static final String EMITTER = ResponseBodyEmitter.class.getName();
  private static final String ASYNC_PACKAGE = "org.springframework.web.context.request.async.";
  private static final @Nullable Class<?> HANDLER_TYPE = handlerType();
  private static final @Nullable Field HANDLER = field("handler");
  private static final @Nullable Field COMPLETE = field("complete");
  private static final @Nullable Field WRITE_LOCK = field("writeLock");
  private static final @Nullable Method INITIALIZE = initialize();
  private static final StackWalker STACK = StackWalker.getInstance();

  /** How long the observer waits for the emitter's lock at most. */
  private static final Duration LOCK_WAIT = Duration.ofSeconds(1);

  private final @Nullable Object handler; // Spring MVC's, or null for an emitter it never got
  private final CompletableFuture<@Nullable Throwable> end = new CompletableFuture<>();
  private volatile boolean sent;
  private volatile @Nullable Runnable completion; // an emitter followed: its completion callback

  private EmitterEnd(@Nullable Object handler) {
    this.handler = handler;
  }

  /**
   * Observes {@code emitter} from now on: the same observer if it is observed already.
   *
   * @return null if it cannot be observed: it ended already (or Spring MVC timed it out), it has no
   *     handler yet, or reflection is refused
   */
  static @Nullable EmitterEnd observe(ResponseBodyEmitter emitter) {
    Class<?> handlerType = HANDLER_TYPE;
    Field handlerField = HANDLER;
    Field completeField = COMPLETE;
    Field lockField = WRITE_LOCK;
    if (handlerType == null || handlerField == null || completeField == null || lockField == null) {
      return null;
    }
    try {
      Lock lock = (Lock) lockField.get(emitter);
      // the emitter's sends and ends hold it: none runs while its handler changes; one that holds
      // it longer than the bound (a send stuck in its write) is sending: not observed
      if (!lock.tryLock(LOCK_WAIT.toMillis(), TimeUnit.MILLISECONDS)) {
        return null;
      }
      try {
        Object current = handlerField.get(emitter);
        if (current == null) {
          return null;
        }
        if (Proxy.isProxyClass(current.getClass())
            && Proxy.getInvocationHandler(current) instanceof EmitterEnd observed) {
          return observed;
        }
        if (completeField.getBoolean(emitter)) {
          return null; // ended already: its end went to Spring MVC
        }
        EmitterEnd observer = new EmitterEnd(current);
        handlerField.set(
            emitter,
            Proxy.newProxyInstance(
                handlerType.getClassLoader(), new Class<?>[] {handlerType}, observer));
        return observer;
      } finally {
        lock.unlock();
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return null;
    } catch (ReflectiveOperationException | RuntimeException e) {
      log.debug("An idempotent endpoint's emitter cannot be observed to its end", e);
      return null;
    }
  }

  /**
   * Follows {@code emitter}, which Spring MVC never got (the work that returned it was taken over
   * by the starter, or outlived its request), to its end: the starter initializes it, as Spring
   * MVC's return value handler would, with an observer in place of Spring MVC's handler, which has
   * no response behind it. A send (one the application made before, too) is heard and dropped; the
   * application's end is heard as for an observed emitter ({@link #whenEnded}); its completion
   * callbacks ({@code onCompletion}) run at that end, as Spring MVC runs them when its request
   * ends, and its timeout and error callbacks never run (there is no request to time out or fail).
   *
   * @return null if it cannot be followed: it has a handler already (something else drives it), or
   *     reflection is refused
   */
  static @Nullable EmitterEnd follow(ResponseBodyEmitter emitter) {
    Class<?> handlerType = HANDLER_TYPE;
    Field handlerField = HANDLER;
    Field lockField = WRITE_LOCK;
    Method initialize = INITIALIZE;
    if (handlerType == null || handlerField == null || lockField == null || initialize == null) {
      return null;
    }
    try {
      Lock lock = (Lock) lockField.get(emitter);
      // initialize takes it too (a reentrant lock): no other initialize runs in between
      if (!lock.tryLock(LOCK_WAIT.toMillis(), TimeUnit.MILLISECONDS)) {
        return null;
      }
      try {
        if (handlerField.get(emitter) != null) {
          return null;
        }
        EmitterEnd observer = new EmitterEnd(null);
        initialize.invoke(
            emitter,
            Proxy.newProxyInstance(
                handlerType.getClassLoader(), new Class<?>[] {handlerType}, observer));
        return observer;
      } finally {
        lock.unlock();
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return null;
    } catch (ReflectiveOperationException | RuntimeException e) {
      log.debug("An idempotent endpoint's later emitter cannot be followed to its end", e);
      return null;
    }
  }

  /** Whether a send of the emitter reached the response since it was observed. */
  boolean sent() {
    return sent;
  }

  /**
   * Runs {@code action} once the application ends the emitter (at once if it did already), with its
   * own failure, or null for an end that may follow a send; on the thread that ended it.
   */
  void whenEnded(Consumer<@Nullable Throwable> action) {
    end.thenAccept(action);
  }

  @Override
  public @Nullable Object invoke(Object proxy, Method method, @Nullable Object[] args)
      throws Throwable {
    if (method.getDeclaringClass() == Object.class) {
      return switch (method.getName()) {
        case "equals" -> args != null && proxy == args[0];
        case "hashCode" -> System.identityHashCode(proxy);
        default -> "observed " + handler;
      };
    }
    String name = method.getName();
    boolean ends = name.equals("complete") || name.equals("completeWithError");
    // an emitter followed (follow) is ended only by the application (its callbacks never
    // run before its end), though perhaps on a thread in Spring MVC's callbacks: the initialize
    // of an emitter the application ended already, in a Callable's post-processing, say
    boolean ownEnd = ends && (handler == null || !fromSpringCallbacks());
    Throwable failure =
        name.equals("completeWithError") && args != null && args[0] instanceof Throwable t
            ? t
            : null;
    if (name.equals("send")) {
      sent = true; // it reached the response: whether or not it fails there, it may have sent
    }
    if (handler == null) {
      return followed(name, args, ownEnd, failure);
    }
    try {
      method.setAccessible(true); // of a package-private interface; allowed, as handlerType() saw
      return method.invoke(handler, args);
    } catch (InvocationTargetException e) {
      throw e.getCause() != null ? e.getCause() : e;
    } finally {
      if (ownEnd) {
        end.complete(failure != null && !mayFollowASend(failure) ? failure : null);
      }
    }
  }

  /**
   * A call to the handler of an emitter the starter follows ({@link #follow}): a send is dropped
   * (there is no response), an end is the end, and of the callbacks only the completion one is
   * kept, to run at the end.
   */
  private @Nullable Object followed(
      String name, @Nullable Object[] args, boolean ownEnd, @Nullable Throwable failure) {
    if (name.equals("onCompletion") && args != null && args[0] instanceof Runnable callback) {
      completion = callback;
    } else if (ownEnd) {
      end.complete(failure != null && !mayFollowASend(failure) ? failure : null);
      Runnable callback = completion;
      completion = null;
      if (callback != null) {
        try {
          callback.run();
        } catch (RuntimeException e) { // as the container would, after Spring MVC's run of it
          log.debug("An idempotent endpoint's emitter completion callback failed", e);
        }
      }
    }
    return null;
  }

  /**
   * Whether the current call comes from Spring MVC's handling of the request's timeout, error or
   * completion (the emitter's callbacks, Spring MVC's async request support), rather than from the
   * application's work.
   */
  private static boolean fromSpringCallbacks() {
    return STACK.walk(
        frames ->
            frames.anyMatch(
                frame -> {
                  String type = frame.getClassName();
                  return type.startsWith(ASYNC_PACKAGE)
                      || type.startsWith(EMITTER + "$")
                      || (type.equals(EMITTER) && frame.getMethodName().startsWith("lambda$"));
                }));
  }

  /**
   * Whether {@code failure} may follow a send: it, a cause or a suppressed exception of it was
   * thrown by the emitter's send, or has no stack trace to tell where it came from.
   */
  static boolean mayFollowASend(Throwable failure) {
    Set<Throwable> seen = Collections.newSetFromMap(new IdentityHashMap<>());
    Deque<Throwable> next = new ArrayDeque<>();
    next.add(failure);
    while (!next.isEmpty() && seen.size() < 64) {
      Throwable current = next.poll();
      if (!seen.add(current)) {
        continue;
      }
      StackTraceElement[] trace = current.getStackTrace();
      if (trace.length == 0) {
        return true;
      }
      for (StackTraceElement frame : trace) {
        if (frame.getClassName().startsWith(EMITTER) && frame.getMethodName().startsWith("send")) {
          return true; // the emitter's send, or Spring MVC's handler's (the same prefix)
        }
      }
      if (current.getCause() != null) {
        next.add(current.getCause());
      }
      Collections.addAll(next, current.getSuppressed());
    }
    return false;
  }

  /** The emitter's package-private {@code Handler}, if its methods may be called from here. */
  private static @Nullable Class<?> handlerType() {
    try {
      Class<?> type =
          Class.forName(EMITTER + "$Handler", false, ResponseBodyEmitter.class.getClassLoader());
      for (Method method : type.getMethods()) {
        if (!method.trySetAccessible()) {
          return null;
        }
      }
      return type;
    } catch (ClassNotFoundException | LinkageError | RuntimeException e) {
      return null;
    }
  }

  /** The emitter's package-private {@code initialize(Handler)}, if it may be called from here. */
  private static @Nullable Method initialize() {
    Class<?> handlerType = HANDLER_TYPE;
    if (handlerType == null) {
      return null;
    }
    try {
      Method method = ResponseBodyEmitter.class.getDeclaredMethod("initialize", handlerType);
      method.setAccessible(true);
      return method;
    } catch (NoSuchMethodException | RuntimeException e) {
      return null;
    }
  }

  private static @Nullable Field field(String name) {
    try {
      Field field = ResponseBodyEmitter.class.getDeclaredField(name);
      field.setAccessible(true);
      return field;
    } catch (NoSuchFieldException | RuntimeException e) {
      return null;
    }
  }
}
