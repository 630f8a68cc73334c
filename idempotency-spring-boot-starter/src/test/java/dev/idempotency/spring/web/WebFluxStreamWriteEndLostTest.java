package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.web.WebFluxStreamClientGoneStepsRedisProbeTest.GatedStreams;
import java.net.Socket;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.reactivestreams.Publisher;
import org.springframework.core.Ordered;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.http.server.reactive.ServerHttpResponseDecorator;
import org.springframework.web.server.ServerWebExchange;
import org.springframework.web.server.WebFilter;
import org.springframework.web.server.WebFilterChain;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * A guarded WebFlux stream (server-sent events, NDJSON) whose client goes away, on a server that
 * never reports the end of its write once it gave up on the body: the key must still be answered
 * from the store once the handler's stream ended, never left in progress.
 *
 * <p>What {@link LostWriteEnd} does is what loops of {@code WebFluxClientGoneRaceProbeTest} caught
 * Reactor Netty doing, under load, now and then: the client reset the connection as the first
 * element came; Reactor Netty's writer of the body ({@code MonoSendMany}), which watches the
 * channel's close from its creation, was ended by that close before it subscribed to the body, then
 * cancelled the body, and the write it had been handed never ended (neither complete nor an error).
 * The stream's outcome waited for that end, so it was never recorded and every retry got 409 for as
 * long as the lease was renewed. Here the lost end comes every time: the end of the server's write
 * is withheld once the write failed or the server cancelled the body. The connection's close must
 * end the wait instead ({@code DetachableBody.written}). It failed so before that fix, on Boot 3.5
 * and 4.0: "events: server gave up true, write end withheld true, 1 runs, 3 sends, stream
 * completed, retry 10 s after its end 409", and the same for NDJSON.
 */
class WebFluxStreamWriteEndLostTest extends WebFluxProbeSupport {

  @BeforeAll
  static void start() {
    start(Map.of("idempotency.store", "memory"), GatedStreams.class, LostWriteEnd.class);
  }

  @Test
  void aStreamWhoseWriteNeverEndsAfterItsClientWentAwayIsAnsweredFromTheStore() throws Exception {
    List<String> problems = new ArrayList<>();
    for (String kind : List.of("events", "lines")) {
      String id = UUID.randomUUID().toString();
      String key = UUID.randomUUID().toString();
      String path = "/gated/" + kind + "/" + id;
      LostWriteEnd.paths.add(path);
      try (Socket client = ClientGoneWatch.post(port, path, key)) {
        await(Probes.runs(id), 1);
        GatedStreams.open(id, 0);
        readUntil(client, "\"n\":0");
        client.setSoLinger(true, 0); // a reset with the close below
      }
      boolean gaveUp = watch.gone(path).await(WAIT_SECONDS, TimeUnit.SECONDS);
      for (int step = 1; step <= 3; step++) {
        GatedStreams.open(id, step);
      }
      awaitEnded(id);
      // ten seconds past the stream's end: more than three leases (3 s), renewed while in progress
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      HttpResponse<String> retry =
          CLIENT.send(post(path, key), HttpResponse.BodyHandlers.ofString());
      while (retry.statusCode() == 409 && System.nanoTime() < deadline) {
        Thread.sleep(20);
        retry = CLIENT.send(post(path, key), HttpResponse.BodyHandlers.ofString());
      }
      int runs = Probes.runs(id).get();
      int sent = Streams.sent(id).get();
      boolean answered =
          (retry.statusCode() == 200 && replayed(retry)) || retry.statusCode() == 422;
      // the device must have acted (the write failed or the body was cancelled): else the row
      // tried nothing
      boolean withheld = LostWriteEnd.withheld.contains(path);
      if (!gaveUp || !withheld || runs != 1 || sent != 3 || !answered) {
        problems.add(
            kind
                + ": server gave up "
                + gaveUp
                + ", write end withheld "
                + withheld
                + ", "
                + runs
                + " runs, "
                + sent
                + " sends, stream "
                + Streams.ended.get(id)
                + ", retry 10 s after its end "
                + retry.statusCode()
                + " replayed="
                + replayed(retry)
                + " "
                + retry.body());
      }
    }
    assertThat(problems).isEmpty();
  }

  /** Reads the response (at most 20 s) until {@code expected} has come. */
  private static void readUntil(Socket client, String expected) throws Exception {
    StringBuilder read = new StringBuilder();
    byte[] buffer = new byte[4096];
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (read.indexOf(expected) < 0 && System.nanoTime() < deadline) {
      int n = client.getInputStream().read(buffer);
      if (n < 0) {
        return;
      }
      read.append(new String(buffer, 0, n, StandardCharsets.UTF_8));
    }
  }

  /**
   * For the paths a test names, withholds the end of the server's write (its completion or error)
   * once the write failed or the server cancelled the body: a server that does not report the end
   * of a write whose client went away. {@link #withheld} names the paths where it did. Inside
   * {@link ClientGoneWatch} (which sees the server give up on the body) and outside the endpoint's
   * filter.
   */
  public static final class LostWriteEnd implements WebFilter, Ordered {

    static final Set<String> paths = ConcurrentHashMap.newKeySet();
    static final Set<String> withheld = ConcurrentHashMap.newKeySet();

    @Override
    public int getOrder() {
      return Ordered.HIGHEST_PRECEDENCE + 1;
    }

    @Override
    public Mono<Void> filter(ServerWebExchange exchange, WebFilterChain chain) {
      String path = exchange.getRequest().getPath().value();
      if (!paths.contains(path)) {
        return chain.filter(exchange);
      }
      ServerHttpResponseDecorator lost =
          new ServerHttpResponseDecorator(exchange.getResponse()) {
            @Override
            public Mono<Void> writeWith(Publisher<? extends DataBuffer> body) {
              AtomicBoolean cancelled = new AtomicBoolean();
              return withheld(
                  super.writeWith(Flux.from(body).doOnCancel(() -> cancel(cancelled, path))),
                  cancelled,
                  path);
            }

            @Override
            public Mono<Void> writeAndFlushWith(
                Publisher<? extends Publisher<? extends DataBuffer>> body) {
              AtomicBoolean cancelled = new AtomicBoolean();
              return withheld(
                  super.writeAndFlushWith(
                      Flux.from(body).doOnCancel(() -> cancel(cancelled, path))),
                  cancelled,
                  path);
            }
          };
      return chain.filter(exchange.mutate().response(lost).build());
    }

    private static void cancel(AtomicBoolean cancelled, String path) {
      cancelled.set(true);
      withheld.add(path); // whatever the write reports from now on is withheld
    }

    private static Mono<Void> withheld(Mono<Void> write, AtomicBoolean cancelled, String path) {
      return write
          .onErrorResume(
              failed -> {
                withheld.add(path);
                return Mono.never();
              })
          .then(
              Mono.defer(
                  () -> {
                    if (cancelled.get()) {
                      withheld.add(path);
                      return Mono.never();
                    }
                    return Mono.empty();
                  }));
    }
  }
}
