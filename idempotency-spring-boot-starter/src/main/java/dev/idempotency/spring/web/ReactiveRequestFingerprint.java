package dev.idempotency.spring.web;

import dev.idempotency.RequestFingerprints;
import dev.idempotency.spring.JsonCodecs;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.jspecify.annotations.Nullable;
import org.springframework.core.io.buffer.DataBufferUtils;
import org.springframework.http.HttpHeaders;
import org.springframework.http.MediaType;
import org.springframework.http.codec.HttpMessageReader;
import org.springframework.http.codec.multipart.FilePart;
import org.springframework.http.codec.multipart.Part;
import org.springframework.http.server.reactive.ServerHttpRequest;
import org.springframework.web.server.ServerWebExchange;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The fingerprint of a WebFlux request whose body was read ({@link BodyFingerprint}): a multipart
 * body counts by its parts (name, file name, content type and a digest of the content; sorted by
 * name, in order within a name) as on Spring MVC, so that a retry with another boundary is the same
 * request; any other body as {@link BodyFingerprint#ofBody} says. A multipart body that does not
 * parse counts by its bytes (the handler then refuses it).
 */
final class ReactiveRequestFingerprint {

  private ReactiveRequestFingerprint() {}

  static Mono<String> of(
      ServerWebExchange exchange,
      byte[] body,
      @Nullable JsonCodecs json,
      List<HttpMessageReader<?>> readers) {
    ServerHttpRequest request = exchange.getRequest();
    String path = request.getPath().value();
    String query = request.getURI().getRawQuery();
    String contentType = request.getHeaders().getFirst(HttpHeaders.CONTENT_TYPE);
    Mono<String> ofBody =
        Mono.fromSupplier(() -> BodyFingerprint.ofBody(path, query, contentType, body, json));
    if (!isMultipart(contentType)) {
      return ofBody;
    }
    ReplayedExchange parsed = ReplayedExchange.of(exchange, body, exchange.getResponse(), readers);
    return parsed
        .getMultipartData()
        .flatMapMany(parts -> Flux.fromIterable(new TreeMap<>(parts).values()))
        .concatMapIterable(sameName -> sameName)
        .concatMap(ReactiveRequestFingerprint::describe)
        .collectList()
        .map(described -> BodyFingerprint.ofParts(path, query, described))
        .onErrorResume(unparsable -> ofBody)
        .flatMap(fingerprint -> parsed.cleanupMultipart().thenReturn(fingerprint));
  }

  private static Mono<Object> describe(Part part) {
    return DataBufferUtils.join(part.content())
        .map(
            buffer -> {
              try {
                byte[] bytes = new byte[buffer.readableByteCount()];
                buffer.read(bytes);
                return bytes;
              } finally {
                DataBufferUtils.release(buffer);
              }
            })
        .defaultIfEmpty(new byte[0])
        .map(
            content -> {
              Map<String, Object> one = new LinkedHashMap<>();
              one.put("name", part.name());
              one.put("file", part instanceof FilePart file ? file.filename() : null);
              MediaType type = part.headers().getContentType();
              one.put("type", type != null ? type.toString() : null);
              one.put("content", sha256(content));
              return one;
            });
  }

  /** The SHA-256 of a part's content in hex, as the servlet side writes it. */
  private static String sha256(byte[] content) {
    return RequestFingerprints.ofBytes(content);
  }

  private static boolean isMultipart(@Nullable String type) {
    if (type == null) {
      return false;
    }
    try {
      return MediaType.parseMediaType(type).isCompatibleWith(MediaType.MULTIPART_FORM_DATA);
    } catch (IllegalArgumentException unparsable) {
      return false;
    }
  }
}
