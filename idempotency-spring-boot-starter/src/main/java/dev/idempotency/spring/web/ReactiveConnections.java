package dev.idempotency.spring.web;

import org.springframework.http.server.reactive.ServerHttpResponse;
import org.springframework.http.server.reactive.ServerHttpResponseDecorator;
import org.springframework.util.ClassUtils;
import reactor.core.publisher.Mono;

/**
 * The end of the connection a WebFlux response is written to: its client went away (a reset, a
 * close) or the server closed it. Known on Reactor Netty (the channel's close); on another server
 * (Tomcat, Jetty, Undertow) or a response of the application's own making, never.
 */
final class ReactiveConnections {

  private static final boolean REACTOR_NETTY =
      ClassUtils.isPresent("reactor.netty.Connection", ReactiveConnections.class.getClassLoader());

  private ReactiveConnections() {}

  /**
   * Completes once the response's connection is closed (at once if it is already); never if that
   * cannot be known. Cancelling it stops watching: a connection kept alive for many requests holds
   * no watch of an earlier one.
   */
  static Mono<Void> closed(ServerHttpResponse response) {
    return REACTOR_NETTY ? ReactorNetty.closed(response) : Mono.never();
  }

  /** Loaded only where Reactor Netty is present. */
  private static final class ReactorNetty {
    static Mono<Void> closed(ServerHttpResponse response) {
      Object served;
      try {
        served = ServerHttpResponseDecorator.getNativeResponse(response);
      } catch (IllegalArgumentException notUnwrappable) {
        return Mono.never(); // a response of the application's own making
      }
      if (!(served instanceof reactor.netty.Connection connection)) {
        return Mono.never();
      }
      io.netty.channel.ChannelFuture close = connection.channel().closeFuture();
      return Mono.create(
          sink -> {
            io.netty.util.concurrent.GenericFutureListener<io.netty.util.concurrent.Future<Void>>
                listener = closedNow -> sink.success();
            close.addListener(listener);
            sink.onCancel(() -> close.removeListener(listener));
          });
    }
  }
}
