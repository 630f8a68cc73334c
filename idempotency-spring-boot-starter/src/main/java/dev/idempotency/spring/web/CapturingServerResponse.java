package dev.idempotency.spring.web;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import org.jspecify.annotations.Nullable;
import org.reactivestreams.Publisher;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpStatusCode;
import org.springframework.http.MediaType;
import org.springframework.http.server.reactive.ServerHttpResponse;
import org.springframework.http.server.reactive.ServerHttpResponseDecorator;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The WebFlux response of a guarded handler, held until its body is complete: then captured for the
 * store (status, {@code Content-Type}, {@code Location}, listed headers, never {@code Set-Cookie};
 * the body only up to the bound) and written. Whoever writes it (the handler's result, an {@code
 * ExceptionHandler}, a {@code WebExceptionHandler}, or the filter completing a response that nobody
 * wrote) is captured alike; the first of these wins.
 */
final class CapturingServerResponse extends ServerHttpResponseDecorator {

  private final List<String> listedHeaders;
  private final long maxResponseBytes;
  private final CompletableFuture<StoredResponse> captured;
  private final Mono<Void> recorded;

  /**
   * @param recorded completes when the captured response may go to the client: at once for one that
   *     is stored, once the release is recorded for one that is not
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

  @Override
  public Mono<Void> writeWith(Publisher<? extends DataBuffer> body) {
    return Flux.from(body)
        .collectList()
        .flatMap(
            buffers -> {
              long size = 0;
              for (DataBuffer buffer : buffers) {
                size += buffer.readableByteCount();
              }
              byte[] bytes = null;
              if (size <= maxResponseBytes) {
                bytes = new byte[(int) size];
                ByteBuffer target = ByteBuffer.wrap(bytes);
                int at = 0;
                for (DataBuffer buffer : buffers) {
                  int length = buffer.readableByteCount();
                  buffer.toByteBuffer(buffer.readPosition(), target, at, length);
                  at += length;
                }
              }
              captured.complete(capture(bytes));
              return recorded.then(
                  Mono.defer(() -> getDelegate().writeWith(Flux.fromIterable(buffers))));
            });
  }

  @Override
  public Mono<Void> writeAndFlushWith(Publisher<? extends Publisher<? extends DataBuffer>> body) {
    return writeWith(Flux.from(body).concatMap(Flux::from));
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
