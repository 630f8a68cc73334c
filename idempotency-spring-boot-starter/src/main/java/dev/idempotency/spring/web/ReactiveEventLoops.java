package dev.idempotency.spring.web;

import java.util.concurrent.Executor;
import org.jspecify.annotations.Nullable;
import org.springframework.http.server.reactive.ServerHttpRequest;
import org.springframework.http.server.reactive.ServerHttpRequestDecorator;
import org.springframework.util.ClassUtils;

/**
 * The event loop a WebFlux request runs on, where its guarded call can go on after the store
 * answered: its connection's Netty event loop on Reactor Netty (an event loop runs a task it is
 * given after the one it is running, never inside the call that gives it, as {@code
 * IdempotencyGuard#executeForOutcomeAsync}'s {@code continueOn} requires). None on another server
 * (Tomcat, Jetty, Undertow).
 */
final class ReactiveEventLoops {

  private static final boolean REACTOR_NETTY =
      ClassUtils.isPresent("reactor.netty.Connection", ReactiveEventLoops.class.getClassLoader());

  private ReactiveEventLoops() {}

  /** The event loop of the request's connection, or null if it is not served by Reactor Netty. */
  static @Nullable Executor of(ServerHttpRequest request) {
    return REACTOR_NETTY ? ReactorNetty.eventLoop(request) : null;
  }

  /** Loaded only where Reactor Netty is present. */
  private static final class ReactorNetty {
    static @Nullable Executor eventLoop(ServerHttpRequest request) {
      Object served;
      try {
        served = ServerHttpRequestDecorator.getNativeRequest(request);
      } catch (IllegalArgumentException notUnwrappable) {
        return null; // a request of the application's own making: the guard's pool, as before
      }
      return served instanceof reactor.netty.Connection connection
          ? connection.channel().eventLoop()
          : null;
    }
  }
}
