package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.util.context.Context;

/**
 * The hand-off of a guarded WebFlux body to the server. The guarded exchange ends when {@link
 * DetachableBody#written} does, and then WebFlux completes the server's response: Reactor Netty
 * writes its last HTTP frame. Ended by the handler's body alone while the server's own write of it
 * was still in flight, that frame overtook the queued write on the event loop ({@code unexpected
 * message type: LastHttpContent, state: 0}), Reactor Netty never counted the response as sent, and
 * the next request on that keep-alive connection was buffered as pipelined for ever: a 60 s timeout
 * in WebFluxRedisEndpointTest on Boot 3.5 and 4.0 under load.
 */
class DetachableBodyTest {

  @Test
  void aWrittenBodyEndsOnlyOnceTheServersWriteOfItEnded() {
    DetachableBody<String> body =
        new DetachableBody<>(Flux.just("a", "b"), Context.empty(), element -> Mono.empty());
    List<String> taken = new CopyOnWriteArrayList<>();
    Sinks.Empty<Void> serverDone = Sinks.empty();
    Mono<Void> serverWrite = Flux.from(body).doOnNext(taken::add).then(serverDone.asMono());
    AtomicBoolean written = new AtomicBoolean();

    body.written(serverWrite, Mono.never()).subscribe(null, error -> {}, () -> written.set(true));

    assertThat(taken).as("the server took the whole body").containsExactly("a", "b");
    assertThat(written).as("the server's write is still going on").isFalse();
    serverDone.tryEmitEmpty();
    assertThat(written).as("the server's write ended").isTrue();
  }

  @Test
  void aBodyWhoseClientWentAwayEndsWithItsSourceDrained() {
    List<String> drained = new CopyOnWriteArrayList<>();
    Sinks.Many<String> source = Sinks.many().unicast().onBackpressureBuffer();
    DetachableBody<String> body =
        new DetachableBody<>(
            source.asFlux(),
            Context.empty(),
            element -> {
              drained.add(element);
              return Mono.empty();
            });
    Sinks.Empty<Void> serverWrite = Sinks.empty();
    AtomicBoolean written = new AtomicBoolean();

    body.written(Flux.from(body).take(1).then(serverWrite.asMono()), Mono.never())
        .subscribe(null, error -> {}, () -> written.set(true));
    source.tryEmitNext("taken by the server");
    serverWrite.tryEmitError(new IllegalStateException("the client went away"));
    source.tryEmitNext("drained");
    assertThat(written).as("the handler's body goes on").isFalse();
    source.tryEmitComplete();

    assertThat(drained).contains("drained");
    assertThat(written).as("ended by the source's own end").isTrue();
  }

  /**
   * What Reactor Netty's writer of a body did when the connection closed just before it subscribed
   * to the body: it cancelled the body and its write never ended. The connection's close ends the
   * wait, once the handler's body (drained) has ended too.
   */
  @Test
  void aBodyWhoseServerCancelledItAndNeverEndedItsWriteEndsOnceTheConnectionClosed() {
    List<String> drained = new CopyOnWriteArrayList<>();
    Sinks.Many<String> source = Sinks.many().unicast().onBackpressureBuffer();
    DetachableBody<String> body =
        new DetachableBody<>(
            source.asFlux(),
            Context.empty(),
            element -> {
              drained.add(element);
              return Mono.empty();
            });
    Sinks.Empty<Void> closed = Sinks.empty();
    AtomicBoolean written = new AtomicBoolean();

    body.written(Flux.from(body).take(1).then(Mono.never()), closed.asMono())
        .subscribe(null, error -> {}, () -> written.set(true));
    source.tryEmitNext("dropped by the server");
    source.tryEmitNext("drained");
    source.tryEmitComplete();
    assertThat(written).as("the server's write has not ended").isFalse();
    closed.tryEmitEmpty();

    assertThat(drained).containsExactly("drained");
    assertThat(written).as("ended by the connection's close and the source's end").isTrue();
  }

  @Test
  void theWatchOfTheConnectionEndsWithTheWrite() {
    DetachableBody<String> body =
        new DetachableBody<>(Flux.just("a"), Context.empty(), element -> Mono.empty());
    AtomicBoolean watchCancelled = new AtomicBoolean();
    Mono<Void> closed = Mono.<Void>never().doOnCancel(() -> watchCancelled.set(true));
    AtomicBoolean written = new AtomicBoolean();

    body.written(Flux.from(body).then(), closed)
        .subscribe(null, error -> {}, () -> written.set(true));

    assertThat(written).isTrue();
    assertThat(watchCancelled).as("a connection kept alive holds no watch of it").isTrue();
  }
}
