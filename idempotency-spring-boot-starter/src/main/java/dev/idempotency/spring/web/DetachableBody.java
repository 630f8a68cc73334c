package dev.idempotency.spring.web;

import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
import org.reactivestreams.Publisher;
import org.reactivestreams.Subscriber;
import org.reactivestreams.Subscription;
import reactor.core.CoreSubscriber;
import reactor.core.Disposable;
import reactor.core.Disposables;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Operators;
import reactor.core.publisher.Sinks;
import reactor.util.context.Context;
import reactor.util.context.ContextView;

/**
 * The body of a guarded WebFlux response, between the handler's publisher (its source) and the
 * server that writes it. While the server writes, it passes elements and demand through unchanged
 * (backpressure towards a live client). When the server gives up (its client went away: it cancels
 * the body, or its write fails), the cancel does not reach the source: the body detaches and drains
 * the source to its end, one element at a time, each handed to {@code drain} (which copies what the
 * capture still needs and releases its buffers), so that the handler's sends go on and the outcome
 * is recorded from the handler's own end (SPEC 13: a client that goes away ends the request, not
 * the send). {@link #written} ends with the source's own signal, never with the client's.
 *
 * <p>One subscriber at most; thread-safe.
 */
final class DetachableBody<T> implements Publisher<T>, CoreSubscriber<T> {

  private static final int NEW = 0;
  private static final int ATTACHED = 1;
  private static final int DETACHED = 2;

  private final Publisher<? extends T> source;
  private final Context context;
  private final Function<? super T, Mono<Void>> drain;
  private final Sinks.Empty<Void> ended = Sinks.empty();
  private final AtomicInteger state = new AtomicInteger(NEW);
  private final AtomicBoolean draining = new AtomicBoolean();
  private final Queue<T> pending = new ConcurrentLinkedQueue<>();
  private final AtomicInteger work = new AtomicInteger();
  private volatile @Nullable Subscriber<? super T> server;
  private volatile @Nullable Subscription upstream;
  private volatile boolean busy;
  private volatile boolean done;
  private volatile @Nullable Throwable failure;

  /**
   * @param source the handler's body
   * @param context the Reactor context of the write, which the source sees
   * @param drain what becomes of an element the server will not take (its end: the element's)
   */
  DetachableBody(
      Publisher<? extends T> source, ContextView context, Function<? super T, Mono<Void>> drain) {
    this.source = source;
    this.context = Context.of(context);
    this.drain = drain;
  }

  /**
   * The server's {@code write}, ended by the source's own end (complete, or the source's error),
   * and never before the write itself ended: the server completes its response once this ends, and
   * a completion that overtook the server's own write of the body (Reactor Netty's last HTTP frame
   * before the queued headers) left the connection's response unfinished for the server, which then
   * never handled the next request on it. An error or end of the write itself (a closed connection)
   * detaches the body first.
   *
   * <p>The connection's close ({@code closed}) ends the write as well, whatever the write reports:
   * once it is closed nothing more of the body can reach the client and no next request can come on
   * it, so nothing is left to overtake. Reactor Netty does not always report the end of a write
   * whose connection closed: its writer of a body ({@code MonoSendMany}) watches the channel's
   * close from its creation, and a close that comes between its creation and its subscription to
   * the body (the client gone as the first element came, the headers already written) ends it
   * before it is subscribed; it then cancels the body and its write never ends, neither complete
   * nor an error (seen in loops of {@code WebFluxClientGoneRaceProbeTest} under load, with the
   * stack of that cancel). The stream's outcome waits for this, so it was never recorded and the
   * key stayed in progress, renewed for as long as the process ran: every retry a 409. The
   * handler's stream still runs to its own end and is drained (SPEC 13: a client that goes away
   * ends the request, not the send); its outcome is recorded, not released, since its sends were
   * made (SPEC 1 and 18: a retry is answered from the store, never sent again): with the copy of
   * the body if every element of it was copied whole, else without its body ({@code 422
   * response-not-stored} on a retry), never a body the handler did not produce.
   *
   * @param write the server's write of this body
   * @param closed completes once the response's connection is closed (never, if not known); it is
   *     cancelled once the write ended, so that a connection kept alive holds no watch of it
   */
  Mono<Void> written(Mono<Void> write, Mono<Void> closed) {
    return Mono.create(
        sink -> {
          AtomicInteger toEnd = new AtomicInteger(2); // the source and the server's write
          Runnable oneEnded =
              () -> {
                if (toEnd.decrementAndGet() == 0) {
                  sink.success();
                }
              };
          AtomicBoolean writeEnded = new AtomicBoolean();
          Disposable.Swap watch = Disposables.swap();
          Runnable writeEnd =
              () -> {
                detach();
                if (writeEnded.compareAndSet(false, true)) {
                  watch.dispose();
                  oneEnded.run();
                }
              };
          ended.asMono().subscribe(null, sink::error, oneEnded);
          // a watch kept after the write ended (closed at once) is disposed by update
          watch.update(closed.subscribe(null, failed -> writeEnd.run(), writeEnd));
          write
              .contextWrite(sink.contextView())
              .subscribe(null, failed -> writeEnd.run(), writeEnd);
        });
  }

  @Override
  public void subscribe(Subscriber<? super T> actual) {
    if (!state.compareAndSet(NEW, ATTACHED)) {
      Operators.error(actual, new IllegalStateException("a response body is written once"));
      return;
    }
    server = actual;
    source.subscribe(this);
  }

  /** The server is done with the body: the rest of the source is drained, not written. */
  void detach() {
    if (state.compareAndSet(NEW, DETACHED)) {
      source.subscribe(this); // the server never took it: run it here
      return;
    }
    state.set(DETACHED);
    startDraining();
  }

  @Override
  public Context currentContext() {
    Subscriber<? super T> actual = server;
    return actual instanceof CoreSubscriber<? super T> core ? core.currentContext() : context;
  }

  @Override
  public void onSubscribe(Subscription subscription) {
    upstream = subscription;
    Subscriber<? super T> actual = server;
    if (actual != null) {
      actual.onSubscribe(new ServerSide());
    }
    if (state.get() == DETACHED) {
      startDraining();
    }
  }

  @Override
  public void onNext(T element) {
    Subscriber<? super T> actual = server;
    if (state.get() == ATTACHED && actual != null) {
      actual.onNext(element);
      return;
    }
    pending.offer(element);
    drainLoop();
  }

  @Override
  public void onError(Throwable error) {
    failure = error;
    done = true;
    Subscriber<? super T> actual = server;
    if (state.get() == ATTACHED && actual != null) {
      actual.onError(error);
    }
    drainLoop();
  }

  @Override
  public void onComplete() {
    done = true;
    Subscriber<? super T> actual = server;
    if (state.get() == ATTACHED && actual != null) {
      actual.onComplete();
    }
    drainLoop();
  }

  private void startDraining() {
    Subscription subscription = upstream;
    if (subscription != null && draining.compareAndSet(false, true)) {
      subscription.request(1);
      drainLoop();
    }
  }

  /** Drains the pending elements one at a time, then ends with the source. */
  private void drainLoop() {
    if (work.getAndIncrement() != 0) {
      return;
    }
    do {
      if (!busy) {
        T next = pending.poll();
        if (next != null) {
          busy = true;
          drain
              .apply(next)
              .contextWrite(currentContext())
              .subscribe(null, this::drainFailed, this::drained);
        } else if (done) {
          Throwable error = failure;
          if (error != null) {
            ended.tryEmitError(error);
          } else {
            ended.tryEmitEmpty();
          }
        }
      }
    } while (work.decrementAndGet() != 0);
  }

  /** An element that failed on its way (an error of the handler's own): the source's end. */
  private void drainFailed(Throwable error) {
    failure = error;
    done = true;
    Subscription subscription = upstream;
    if (subscription != null) {
      subscription.cancel();
    }
    drained();
  }

  private void drained() {
    busy = false;
    Subscription subscription = upstream;
    if (!done && subscription != null) {
      subscription.request(1);
    }
    drainLoop();
  }

  /** The subscription the server holds: its demand passes through, its cancel detaches. */
  private final class ServerSide implements Subscription {
    @Override
    public void request(long n) {
      Subscription subscription = upstream;
      if (state.get() == ATTACHED && subscription != null) {
        subscription.request(n);
      }
    }

    @Override
    public void cancel() {
      detach();
    }
  }
}
