package dev.idempotency.spring.web;

import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicReference;
import org.jspecify.annotations.Nullable;
import org.springframework.http.server.reactive.ServerHttpRequest;
import org.springframework.http.server.reactive.ServerHttpRequestDecorator;
import org.springframework.util.ClassUtils;
import reactor.netty.NettyInbound;

/**
 * The event loop that serves a WebFlux request on Reactor Netty, where a guarded request goes on
 * once its store answered: the thread WebFlux runs its handler and writes its response on anyway,
 * so that neither waits for a hand-over to the guard's async pool and back (a thread wake-up each
 * on the way in and out). A Netty event loop queues every task it is given, even from itself, and
 * rejects tasks once it is shut down (the guard then goes on on its own async executor), as {@link
 * dev.idempotency.IdempotencyGuard#executeForOutcomeAsync(dev.idempotency.IdempotencyRequest,
 * dev.idempotency.ResultCodec, dev.idempotency.AsyncSender, Executor)} asks of it. On any other
 * server there is none, and the guard's async executor is used as before.
 */
final class RequestEventLoops {

  private static final boolean REACTOR_NETTY =
      ClassUtils.isPresent("reactor.netty.NettyInbound", RequestEventLoops.class.getClassLoader());

  private RequestEventLoops() {}

  /** The request's event loop, or null when it is not served by Reactor Netty. */
  static @Nullable Executor of(ServerHttpRequest request) {
    if (!REACTOR_NETTY) {
      return null;
    }
    Object nativeRequest;
    try {
      nativeRequest = ServerHttpRequestDecorator.getNativeRequest(request);
    } catch (IllegalArgumentException noNativeRequest) {
      return null; // a request that no server made (a mock, a decorator of another kind)
    }
    return OnReactorNetty.eventLoop(nativeRequest);
  }

  /** Loaded only when Reactor Netty is on the class path. */
  private static final class OnReactorNetty {

    static @Nullable Executor eventLoop(Object nativeRequest) {
      if (!(nativeRequest instanceof NettyInbound inbound)) {
        return null;
      }
      AtomicReference<@Nullable Executor> loop = new AtomicReference<>();
      inbound.withConnection(connection -> loop.set(connection.channel().eventLoop()));
      return loop.get();
    }
  }
}
