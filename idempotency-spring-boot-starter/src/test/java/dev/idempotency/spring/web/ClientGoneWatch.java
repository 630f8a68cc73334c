package dev.idempotency.spring.web;

import java.io.IOException;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.reactivestreams.Publisher;
import org.springframework.core.Ordered;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.http.server.reactive.ServerHttpResponseDecorator;
import org.springframework.web.server.ServerWebExchange;
import org.springframework.web.server.WebFilter;
import org.springframework.web.server.WebFilterChain;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.SignalType;

/**
 * Test support: sees the server's writer give up on a response because its client went away (it
 * cancelled the body it was writing, or the write failed), per request path. The outermost filter,
 * so it sits between the endpoint's response decorator and Reactor Netty; the latch opens after the
 * cancel went up the body's publisher, so a test that waits for it acts once whatever the cancel
 * would stop has been stopped: no guess of how long the server takes to notice.
 */
final class ClientGoneWatch implements WebFilter, Ordered {

  private final Map<String, CountDownLatch> gone = new ConcurrentHashMap<>();
  private final Map<String, CountDownLatch> closed = new ConcurrentHashMap<>();

  /**
   * A raw request on a socket, which the test closes with the response unread (a reset), so that
   * the server sees the client go away at once (an {@code HttpClient} body stream closed early is
   * not always seen).
   */
  static Socket post(int port, String path, String key) throws IOException {
    Socket client = new Socket("127.0.0.1", port);
    OutputStream out = client.getOutputStream();
    out.write(
        ("POST "
                + path
                + " HTTP/1.1\r\nHost: 127.0.0.1\r\nIdempotency-Key: "
                + key
                + "\r\nContent-Length: 0\r\n\r\n")
            .getBytes(StandardCharsets.US_ASCII));
    out.flush();
    client.setSoTimeout(30_000);
    return client;
  }

  /** Opens once the server gave up writing the response to a request for {@code path}. */
  CountDownLatch gone(String path) {
    return gone.computeIfAbsent(path, ignored -> new CountDownLatch(1));
  }

  /**
   * Opens once the server gave up writing the response to a request for {@code path}, or saw the
   * connection it was written to closed. Since the endpoint ends a stream's write at its
   * connection's close (Reactor Netty does not always report that end, see {@code
   * DetachableBody#written}), the server's writer may never get an element to fail on or a body to
   * cancel: the close is then what the server saw of the client going away.
   */
  boolean goneOrClosed(String path, long seconds) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
    CountDownLatch gaveUp = gone(path);
    CountDownLatch connectionClosed = closed(path);
    while (System.nanoTime() < deadline) {
      if (gaveUp.await(10, TimeUnit.MILLISECONDS) || connectionClosed.getCount() == 0) {
        return true;
      }
    }
    return gaveUp.getCount() == 0 || connectionClosed.getCount() == 0;
  }

  private CountDownLatch closed(String path) {
    return closed.computeIfAbsent(path, ignored -> new CountDownLatch(1));
  }

  @Override
  public int getOrder() {
    return Ordered.HIGHEST_PRECEDENCE;
  }

  @Override
  public Mono<Void> filter(ServerWebExchange exchange, WebFilterChain chain) {
    CountDownLatch latch = gone(exchange.getRequest().getPath().value());
    CountDownLatch connectionClosed = closed(exchange.getRequest().getPath().value());
    // the connection's close, seen by the server (a listener on the channel, released with it)
    ReactiveConnections.closed(exchange.getResponse())
        .subscribe(null, failed -> connectionClosed.countDown(), connectionClosed::countDown);
    ServerHttpResponseDecorator watched =
        new ServerHttpResponseDecorator(exchange.getResponse()) {
          @Override
          public Mono<Void> writeWith(Publisher<? extends DataBuffer> body) {
            return super.writeWith(watch(Flux.from(body), latch))
                .doOnError(failed -> latch.countDown());
          }

          @Override
          public Mono<Void> writeAndFlushWith(
              Publisher<? extends Publisher<? extends DataBuffer>> body) {
            return super.writeAndFlushWith(watch(Flux.from(body), latch))
                .doOnError(failed -> latch.countDown());
          }
        };
    return chain.filter(exchange.mutate().response(watched).build());
  }

  /** {@code doFinally} runs after the cancel went upstream. */
  private static <T> Flux<T> watch(Flux<T> body, CountDownLatch latch) {
    return body.doFinally(
        signal -> {
          if (signal == SignalType.CANCEL) {
            latch.countDown();
          }
        });
  }
}
