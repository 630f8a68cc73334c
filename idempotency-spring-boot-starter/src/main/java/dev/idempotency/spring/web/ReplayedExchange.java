package dev.idempotency.spring.web;

import java.util.List;
import java.util.Map;
import org.springframework.core.ResolvableType;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.core.io.buffer.DefaultDataBufferFactory;
import org.springframework.http.InvalidMediaTypeException;
import org.springframework.http.MediaType;
import org.springframework.http.codec.HttpMessageReader;
import org.springframework.http.codec.multipart.Part;
import org.springframework.http.server.reactive.ServerHttpRequest;
import org.springframework.http.server.reactive.ServerHttpRequestDecorator;
import org.springframework.http.server.reactive.ServerHttpResponse;
import org.springframework.util.CollectionUtils;
import org.springframework.util.LinkedMultiValueMap;
import org.springframework.util.MultiValueMap;
import org.springframework.web.server.ServerWebExchange;
import org.springframework.web.server.ServerWebExchangeDecorator;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The exchange a guarded WebFlux handler sees: the request body, read once for the fingerprint,
 * handed to it again; its form and multipart data parsed from those bytes (the exchange the server
 * made would read the request's body a second time, which a server such as Netty refuses); and the
 * response that {@link CapturingServerResponse} captures.
 */
final class ReplayedExchange extends ServerWebExchangeDecorator {

  private static final ResolvableType FORM_DATA =
      ResolvableType.forClassWithGenerics(MultiValueMap.class, String.class, String.class);
  private static final ResolvableType MULTIPART_DATA =
      ResolvableType.forClassWithGenerics(MultiValueMap.class, String.class, Part.class);

  private final List<HttpMessageReader<?>> readers;
  private final Mono<MultiValueMap<String, String>> formData;
  private final Mono<MultiValueMap<String, Part>> multipartData;
  private volatile boolean multipartRead;

  private ReplayedExchange(ServerWebExchange delegate, List<HttpMessageReader<?>> readers) {
    super(delegate);
    this.readers = readers;
    this.formData =
        Mono.defer(() -> this.<String>read(FORM_DATA, MediaType.APPLICATION_FORM_URLENCODED))
            .cache();
    this.multipartData =
        Mono.defer(
                () -> {
                  multipartRead = true;
                  return this.<Part>read(MULTIPART_DATA, MediaType.MULTIPART_FORM_DATA);
                })
            .cache();
  }

  /**
   * The exchange for a guarded handler.
   *
   * @param exchange the server's exchange, whose body was read
   * @param body the body that was read
   * @param response the response the handler writes to
   * @param readers the application's HTTP message readers, for form and multipart data
   */
  static ReplayedExchange of(
      ServerWebExchange exchange,
      byte[] body,
      ServerHttpResponse response,
      List<HttpMessageReader<?>> readers) {
    return new ReplayedExchange(
        exchange
            .mutate()
            .request(new ReplayedBody(exchange.getRequest(), body))
            .response(response)
            .build(),
        readers);
  }

  @Override
  public Mono<MultiValueMap<String, String>> getFormData() {
    return formData;
  }

  @Override
  public Mono<MultiValueMap<String, Part>> getMultipartData() {
    return multipartData;
  }

  /** Deletes the parts parsed here (a part may be held in a temporary file). */
  @Override
  public Mono<Void> cleanupMultipart() {
    if (!multipartRead) {
      return Mono.empty();
    }
    return multipartData
        .onErrorResume(error -> Mono.empty())
        .flatMapIterable(Map::values)
        .flatMapIterable(parts -> parts)
        .concatMap(part -> part.delete().onErrorResume(error -> Mono.empty()))
        .then();
  }

  @SuppressWarnings("unchecked")
  private <V> Mono<MultiValueMap<String, V>> read(ResolvableType type, MediaType expected) {
    ServerHttpRequest request = getRequest();
    MediaType contentType;
    try {
      contentType = request.getHeaders().getContentType();
    } catch (InvalidMediaTypeException malformed) {
      contentType = null;
    }
    if (contentType == null || !contentType.isCompatibleWith(expected)) {
      return Mono.just(CollectionUtils.unmodifiableMultiValueMap(new LinkedMultiValueMap<>(0)));
    }
    for (HttpMessageReader<?> reader : readers) {
      if (reader.canRead(type, contentType)) {
        return ((HttpMessageReader<MultiValueMap<String, V>>) reader)
            .readMono(type, request, Map.of())
            .switchIfEmpty(Mono.fromSupplier(() -> new LinkedMultiValueMap<>(0)));
      }
    }
    return Mono.error(new IllegalStateException("No HttpMessageReader for " + contentType));
  }

  /** The request with its body, read for the fingerprint, handed to the handler again. */
  private static final class ReplayedBody extends ServerHttpRequestDecorator {
    private final byte[] body;

    ReplayedBody(ServerHttpRequest delegate, byte[] body) {
      super(delegate);
      this.body = body;
    }

    @Override
    public Flux<DataBuffer> getBody() {
      return Flux.defer(() -> Flux.just(DefaultDataBufferFactory.sharedInstance.wrap(body)));
    }
  }
}
