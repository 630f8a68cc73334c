package dev.idempotency.spring.web;

import java.lang.reflect.Method;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import org.aopalliance.aop.Advice;
import org.aopalliance.intercept.MethodInterceptor;
import org.jspecify.annotations.Nullable;
import org.reactivestreams.Subscription;
import org.springframework.aop.Pointcut;
import org.springframework.aop.support.AbstractPointcutAdvisor;
import org.springframework.aop.support.annotation.AnnotationMatchingPointcut;
import org.springframework.core.Ordered;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.http.server.reactive.ServerHttpRequest;
import org.springframework.http.server.reactive.ServerHttpRequestDecorator;
import org.springframework.web.server.ServerWebExchange;
import org.springframework.web.server.WebFilterChain;
import reactor.core.CoreSubscriber;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Operators;
import reactor.util.context.Context;

/**
 * Sees a Spring WebFlux {@link IdempotentEndpoint} handler method invoked: an advice on the method
 * itself, so it runs after WebFlux resolved, bound and validated the arguments (a request refused
 * there never reaches it) and before the method's body, whatever the method returns. It is the
 * innermost advice ({@link Ordered#LOWEST_PRECEDENCE}, and moved to the end of the chain at startup
 * past advice added to the proxy later, such as the method validation of a class-level
 * {@code @Validated} controller), so that a call refused by method security or method validation
 * around it is not counted either. The Spring Boot auto-configuration registers it as an
 * infrastructure bean for reactive applications; {@link IdempotentEndpointWebFilter} asks it.
 *
 * <p><b>Which request an invocation belongs to.</b> On Spring MVC the advice finds its request
 * through {@code RequestContextHolder}. WebFlux's {@code InvocableHandlerMethod} calls the method
 * from inside its reactive pipeline, with neither the exchange nor the Reactor {@code Context} in
 * reach of a plain call (a {@code void} or value-returning method has no {@code Mono} whose context
 * could be read), and it offers no hook of its own there. What does hold is that the call happens
 * synchronously on the thread that delivered the last argument: when that is the thread on which
 * the filter subscribed the request's handler chain, still inside that {@code subscribe} call (the
 * usual case: the filter hands the handler a body already read, so decoding and validating it do
 * not wait for anything), the invocation belongs to that request. So the filter marks the thread
 * with its request's {@link Expected} for the duration of the subscription ({@link #subscribing}),
 * as Spring MVC binds a request to its thread, and the advice claims the mark: that request was
 * invoked, and no other request's decision is touched. A Reactor {@code Context} entry would not
 * do: the advice cannot read it. A request that the filter does not guard (no key, none required)
 * is marked too ({@link #unguarded}), while its chain is subscribed and while its body, which the
 * server delivers as it arrives, reaches the handler's decoders, so that its invocation is not
 * counted for the guarded ones either.
 *
 * <p>An invocation that finds no mark (an argument that arrived later from elsewhere, such as a
 * session loaded asynchronously, or an invocation scheduler), or a mark of another method, or a
 * mark already claimed, is counted per method as unattributed, and every request of that method
 * whose handler chain ran meanwhile treats it as possibly its own. That keeps the error on the side
 * of storing a refusal, never of releasing a key whose handler ran. The one case this does not
 * cover: application code that, on a thread marked for one request (which was then refused before
 * its handler), synchronously completes the arguments of another request to the same method,
 * waiting elsewhere (a batching resolver that dispatches on one request's thread); that other
 * request's invocation is then taken for the refused one's.
 *
 * <p>Thread-safe.
 */
public final class IdempotentEndpointInvocations extends AbstractPointcutAdvisor {

  private static final long serialVersionUID = 1L;

  private final transient Pointcut pointcut =
      new AnnotationMatchingPointcut(null, IdempotentEndpoint.class, true);

  private final transient ConcurrentMap<Method, AtomicLong> unattributed =
      new ConcurrentHashMap<>();

  /** The request whose handler chain this thread is subscribing, if any. */
  private final transient ThreadLocal<@Nullable Expected> subscribing = new ThreadLocal<>();

  private final transient MethodInterceptor advice =
      invocation -> {
        Method method = invocation.getMethod();
        Expected expected = subscribing.get();
        if (expected == null || !expected.claim(method)) {
          counter(method).incrementAndGet();
        }
        return invocation.proceed();
      };

  /** Creates the advisor, innermost of the advisors on a handler method. */
  public IdempotentEndpointInvocations() {
    setOrder(Ordered.LOWEST_PRECEDENCE);
  }

  @Override
  public Pointcut getPointcut() {
    return pointcut;
  }

  @Override
  public Advice getAdvice() {
    return advice;
  }

  /** The evidence for one request to {@code method}, taken before its handler chain starts. */
  Expected expect(Method method) {
    return new Expected(method, counter(method).get());
  }

  /**
   * Runs {@code subscribe} (the subscription of the request's handler chain) with the thread marked
   * as working for {@code expected}; a mark already there (a chain subscribed from inside
   * another's) is put back afterwards.
   */
  <T> T subscribing(Expected expected, Supplier<T> subscribe) {
    Expected outer = subscribing.get();
    subscribing.set(expected);
    try {
      return subscribe.get();
    } finally {
      if (outer == null) {
        subscribing.remove();
      } else {
        subscribing.set(outer);
      }
    }
  }

  /**
   * The handler chain of a request to {@code method} that is not guarded (it has no key, and the
   * endpoint requires none), run with the thread marked for that request while the chain is
   * subscribed and while its body's signals are delivered (its arguments are decoded as the body
   * arrives): its invocation is its own, not one that every guarded request to the method running
   * at the time must count as possibly theirs.
   */
  Mono<Void> unguarded(Method method, ServerWebExchange exchange, WebFilterChain chain) {
    Expected expected = expect(method);
    ServerWebExchange marked =
        exchange.mutate().request(new MarkedBody(exchange.getRequest(), expected)).build();
    return Mono.create(
        sink ->
            sink.onCancel(
                subscribing(
                    expected,
                    () ->
                        chain
                            .filter(marked)
                            .contextWrite(sink.contextView())
                            .subscribe(null, sink::error, sink::success))));
  }

  /**
   * Whether the request's handler method may have been invoked: it claimed the request's mark, or
   * an invocation of the method that no request claimed happened since {@link #expect}. False means
   * certainly not invoked for that request.
   */
  boolean mayHaveBeenInvoked(Expected expected) {
    return expected.invoked.get() || counter(expected.method).get() != expected.unattributedBefore;
  }

  private AtomicLong counter(Method method) {
    return unattributed.computeIfAbsent(method, m -> new AtomicLong());
  }

  /** What one request expects to see: its handler method, invoked once. */
  static final class Expected {
    private final Method method;
    private final long unattributedBefore;
    private final AtomicBoolean invoked = new AtomicBoolean();

    private Expected(Method method, long unattributedBefore) {
      this.method = method;
      this.unattributedBefore = unattributedBefore;
    }

    /** True if this is the request's first invocation of its own method. */
    private boolean claim(Method invokedMethod) {
      return method.equals(invokedMethod) && invoked.compareAndSet(false, true);
    }
  }

  /** A request whose body's signals reach its handler with the thread marked for the request. */
  private final class MarkedBody extends ServerHttpRequestDecorator {
    private final Expected expected;

    MarkedBody(ServerHttpRequest delegate, Expected expected) {
      super(delegate);
      this.expected = expected;
    }

    @Override
    public Flux<DataBuffer> getBody() {
      return super.getBody()
          .hide()
          .transform(
              Operators.<DataBuffer, DataBuffer>lift(
                  (scannable, actual) -> new MarkedSignals<>(actual, expected)));
    }
  }

  /** Delivers each signal to {@code actual} with the thread marked for {@code expected}. */
  private final class MarkedSignals<T> implements CoreSubscriber<T> {
    private final CoreSubscriber<? super T> actual;
    private final Expected expected;

    MarkedSignals(CoreSubscriber<? super T> actual, Expected expected) {
      this.actual = actual;
      this.expected = expected;
    }

    @Override
    public Context currentContext() {
      return actual.currentContext();
    }

    @Override
    public void onSubscribe(Subscription subscription) {
      actual.onSubscribe(subscription);
    }

    @Override
    public void onNext(T value) {
      subscribing(expected, () -> deliver(() -> actual.onNext(value)));
    }

    @Override
    public void onError(Throwable error) {
      subscribing(expected, () -> deliver(() -> actual.onError(error)));
    }

    @Override
    public void onComplete() {
      subscribing(expected, () -> deliver(actual::onComplete));
    }

    private @Nullable Void deliver(Runnable signal) {
      signal.run();
      return null;
    }
  }
}
