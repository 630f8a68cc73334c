package dev.idempotency.spring.web;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import org.jspecify.annotations.Nullable;
import org.reactivestreams.Publisher;
import org.reactivestreams.Subscriber;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.core.io.buffer.DataBufferUtils;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpStatusCode;
import org.springframework.http.MediaType;
import org.springframework.http.server.reactive.ServerHttpResponse;
import org.springframework.http.server.reactive.ServerHttpResponseDecorator;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Operators;

/**
 * The WebFlux response of a guarded handler, held until its body is complete: then captured for the
 * store (status, {@code Content-Type}, {@code Location}, listed headers, never {@code Set-Cookie})
 * and written. Whoever writes it (the handler's result, an {@code ExceptionHandler}, a {@code
 * WebExceptionHandler}, or the filter completing a response that nobody wrote) is captured alike;
 * the first of these wins. A held response goes to the client once {@code recorded} says so: once
 * its outcome (stored, or its key released) is recorded. Never more than the bound is held: a body
 * that grows past it goes to the client as it comes and is captured without its body (a retry gets
 * {@code 422 response-not-stored}). A stream its writer flushes element by element (server-sent
 * events) is not held at all: it goes to the client as it comes, a copy kept up to the bound, and
 * is captured when it ends (with the copy) or grows past the bound (without a body). A client that
 * goes away ends the request, not the send: the handler's body is drained to its own end and
 * captured as if it had been written ({@link DetachableBody}); only the handler's own error fails
 * it.
 */
final class CapturingServerResponse extends ServerHttpResponseDecorator {

  private final List<String> listedHeaders;
  private final long maxResponseBytes;
  private final CompletableFuture<StoredResponse> captured;
  private final Mono<Void> recorded;

  /**
   * @param recorded completes when the captured response may go to the client: once its outcome
   *     (stored, or its key released) is recorded
   */
  CapturingServerResponse(
      ServerHttpResponse delegate,
      List<String> listedHeaders,
      long maxResponseBytes,
      CompletableFuture<StoredResponse> captured,
      Mono<Void> recorded) {
    super(delegate);
    this.listedHeaders = listedHeaders;
    this.maxResponseBytes = maxResponseBytes;
    this.captured = captured;
    this.recorded = recorded;
  }

  /**
   * Holds the body back until it ends, then captures it and writes it; a body that grows past the
   * bound is sent on as it comes (what was held first) and captured without its body, so that no
   * more than the bound is ever held. A client that goes away does not stop the handler's body: it
   * is drained to its end ({@link DetachableBody}), still captured as above, its buffers released.
   */
  @Override
  public Mono<Void> writeWith(Publisher<? extends DataBuffer> body) {
    return Mono.deferContextual(
        context -> {
          HeldBody held = new HeldBody();
          Flux<DataBuffer> bounded =
              Flux.<DataBuffer>from(body)
                  .concatMapIterable(held::add)
                  .concatWith(
                      Flux.defer(
                          () -> {
                            List<DataBuffer> rest = held.complete();
                            return recorded.thenMany(Flux.fromIterable(rest));
                          }))
                  .doFinally(signal -> held.releaseHeld())
                  .doOnDiscard(DataBuffer.class, DataBufferUtils::release);
          DetachableBody<DataBuffer> detachable =
              new DetachableBody<>(bounded, context, CapturingServerResponse::release);
          return detachable.written(
              getDelegate().writeWith(detachable), ReactiveConnections.closed(getDelegate()));
        });
  }

  /**
   * A body its writer flushes element by element (server-sent events, NDJSON: a stream that may
   * never end) goes to the client as it comes, and a copy of it is kept up to the bound: once the
   * whole stream is written it is captured with that copy, or, once it grows past the bound,
   * captured at once without its body. A client that goes away does not stop the stream: it is
   * drained to its end (an endless one runs on until it ends), still copied, and captured by its
   * own end: with its copy if every element was copied whole, else without its body.
   */
  @Override
  public Mono<Void> writeAndFlushWith(Publisher<? extends Publisher<? extends DataBuffer>> body) {
    return Mono.deferContextual(
        context -> {
          StreamCopy copy = new StreamCopy();
          DetachableBody<CopiedElement> detachable =
              new DetachableBody<>(Flux.from(body).map(copy::element), context, copy::drainUpTo);
          return detachable
              .written(
                  getDelegate().writeAndFlushWith(detachable),
                  ReactiveConnections.closed(getDelegate()))
              .then(Mono.defer(() -> copy.drainUpTo(null)))
              .doOnSuccess(written -> copy.complete());
        });
  }

  private static Mono<Void> release(DataBuffer buffer) {
    DataBufferUtils.release(buffer);
    return Mono.empty();
  }

  @Override
  public Mono<Void> setComplete() {
    return Mono.defer(
        () -> {
          if (!captured.isDone()) {
            captured.complete(capture(new byte[0]));
          }
          return recorded.then(Mono.defer(getDelegate()::setComplete));
        });
  }

  private StoredResponse capture(byte @Nullable [] body) {
    HttpHeaders headers = getHeaders();
    List<Map.Entry<String, String>> kept = new ArrayList<>();
    MediaType type = headers.getContentType();
    if (type != null) {
      kept.add(Map.entry("Content-Type", type.toString()));
    }
    List<String> names = new ArrayList<>();
    names.add("Location");
    names.addAll(listedHeaders);
    for (String name : names) {
      for (String value : values(headers, name)) {
        kept.add(Map.entry(name, value));
      }
    }
    HttpStatusCode status = getStatusCode();
    return new StoredResponse(status != null ? status.value() : 200, List.copyOf(kept), body);
  }

  /** The body held back so far, until it ends or grows past the bound. */
  private final class HeldBody {
    private List<DataBuffer> buffers = new ArrayList<>();
    private long size;
    private boolean passedOn;

    /** Holds a buffer back, or answers what is to be written now. */
    synchronized List<DataBuffer> add(DataBuffer buffer) {
      if (passedOn) {
        return List.of(buffer);
      }
      buffers.add(buffer);
      size += buffer.readableByteCount();
      if (size <= maxResponseBytes) {
        return List.of();
      }
      passedOn = true; // past the bound: recorded as answered, the body not kept
      captured.complete(capture(null));
      List<DataBuffer> held = buffers;
      buffers = new ArrayList<>();
      return held;
    }

    /** At the body's end: captures what was held (unless it was passed on) and hands it out. */
    synchronized List<DataBuffer> complete() {
      if (passedOn) {
        return List.of();
      }
      byte[] bytes = new byte[(int) size];
      ByteBuffer target = ByteBuffer.wrap(bytes);
      int at = 0;
      for (DataBuffer buffer : buffers) {
        int length = buffer.readableByteCount();
        buffer.toByteBuffer(buffer.readPosition(), target, at, length);
        at += length;
      }
      captured.complete(capture(bytes));
      passedOn = true;
      List<DataBuffer> held = buffers;
      buffers = new ArrayList<>();
      return held;
    }

    /** Releases what is still held when the body ends early (an error, a cancel). */
    synchronized void releaseHeld() {
      buffers.forEach(DataBufferUtils::release);
      buffers.clear();
    }
  }

  /** A copy of a stream's bytes as they pass, up to the bound. */
  private final class StreamCopy {
    private @Nullable ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    private final Queue<CopiedElement> untaken = new ConcurrentLinkedQueue<>();
    private long elements;
    private long copiedWhole;

    /** One element of the stream, copied as it passes; counted as whole once it completes. */
    synchronized CopiedElement element(Publisher<? extends DataBuffer> element) {
      elements++;
      CopiedElement copied = new CopiedElement(element, this);
      untaken.add(copied);
      return copied;
    }

    private synchronized void copiedWhole() {
      copiedWhole++;
    }

    /**
     * Drains, in order, the elements nobody took up to {@code last} (all if null): one the server
     * was handed as its client went away and dropped without writing it comes before the ones
     * drained after it.
     */
    Mono<Void> drainUpTo(@Nullable CopiedElement last) {
      List<CopiedElement> due = new ArrayList<>();
      synchronized (this) {
        for (CopiedElement next = untaken.poll(); next != null; next = untaken.poll()) {
          due.add(next);
          if (next == last) {
            break;
          }
        }
      }
      return Flux.fromIterable(due).concatMap(CopiedElement::drain).then();
    }

    /** Copies a buffer on its way to the client; past the bound, captures without the body. */
    synchronized void add(DataBuffer buffer) {
      if (bytes == null) {
        return;
      }
      int length = buffer.readableByteCount();
      if (bytes.size() + (long) length > maxResponseBytes) {
        bytes = null; // past the bound: recorded as answered, the body not kept
        captured.complete(capture(null));
        return;
      }
      byte[] chunk = new byte[length];
      buffer.toByteBuffer(buffer.readPosition(), ByteBuffer.wrap(chunk), 0, length);
      bytes.writeBytes(chunk);
    }

    /**
     * The stream ended: captured with its body if it was kept and every element was copied whole
     * (an element the server dropped as its client went away was not), else without it (a retry
     * gets {@code 422 response-not-stored}, never a replay cut short, nor a second run).
     */
    synchronized void complete() {
      if (bytes != null) {
        captured.complete(capture(copiedWhole == elements ? bytes.toByteArray() : null));
      }
    }
  }

  /** One element of a stream: taken once, by the server's writer or, once it gave up, the drain. */
  private static final class CopiedElement implements Publisher<DataBuffer> {
    private final Publisher<? extends DataBuffer> element;
    private final StreamCopy copy;
    private final AtomicBoolean taken = new AtomicBoolean();

    CopiedElement(Publisher<? extends DataBuffer> element, StreamCopy copy) {
      this.element = element;
      this.copy = copy;
    }

    @Override
    public void subscribe(Subscriber<? super DataBuffer> subscriber) {
      if (taken.compareAndSet(false, true)) {
        copy.untaken.remove(this);
        copied().subscribe(subscriber);
      } else {
        Operators.error(subscriber, new IllegalStateException("a stream element is written once"));
      }
    }

    /** The element, copied as it passes, unless the server took it: then nothing. */
    Mono<Void> drain() {
      return taken.compareAndSet(false, true)
          ? copied().doOnNext(DataBufferUtils::release).then()
          : Mono.empty();
    }

    private Flux<DataBuffer> copied() {
      return Flux.<DataBuffer>from(element).doOnNext(copy::add).doOnComplete(copy::copiedWhole);
    }
  }

  /**
   * A header's values, one per field, by a call that links on Spring Framework 6 and 7 alike
   * ({@code HttpHeaders} stopped being a {@code Map} in 7, so {@code getOrEmpty(Object)} and {@code
   * get(Object)} are gone there; {@code forEach} exists in both).
   */
  static List<String> values(HttpHeaders headers, String name) {
    List<String> found = new ArrayList<>();
    headers.forEach(
        (header, values) -> {
          if (header.equalsIgnoreCase(name)) {
            found.addAll(values);
          }
        });
    return found;
  }
}
