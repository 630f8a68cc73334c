package dev.idempotency.spring.web;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.SendContext;
import dev.idempotency.spring.JsonCodecs;
import java.security.Principal;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.core.Ordered;
import org.springframework.core.io.buffer.DataBufferLimitException;
import org.springframework.core.io.buffer.DataBufferUtils;
import org.springframework.http.codec.HttpMessageReader;
import org.springframework.http.server.reactive.ServerHttpRequest;
import org.springframework.web.method.HandlerMethod;
import org.springframework.web.reactive.HandlerMapping;
import org.springframework.web.reactive.result.method.annotation.RequestMappingHandlerMapping;
import org.springframework.web.server.ServerWebExchange;
import org.springframework.web.server.WebExceptionHandler;
import org.springframework.web.server.WebFilter;
import org.springframework.web.server.WebFilterChain;
import org.springframework.web.util.pattern.PathPattern;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * {@link IdempotentEndpoint} on Spring WebFlux annotated controllers: the rules of the Spring MVC
 * endpoint (SPEC section 13), without blocking a Netty event loop.
 *
 * <p><b>Why a {@code WebFilter}.</b> WebFlux has no {@code HandlerInterceptor}, and what the
 * endpoint needs lives on the exchange, not on the handler's return value: the request body is a
 * one-shot {@code Flux<DataBuffer>} that must be read for the fingerprint and handed again to the
 * handler's argument resolvers, and the stored response is the bytes that reach the client, whoever
 * wrote them (a {@code ResponseEntity}, an {@code @ExceptionHandler}'s {@code ProblemDetail}, a
 * view). A {@code ServerWebExchange} decorator around the handler sees both, as Spring Security's
 * reactive filters do; a {@code HandlerResult} handler would see neither the body nor what
 * exception handling writes. The filter asks the application's {@link RequestMappingHandlerMapping}
 * for the handler (its answer is cached by the mapping's registry lookup and sets the path pattern
 * attribute), so only annotated handler methods are guarded and every other request passes through
 * untouched.
 *
 * <ol>
 *   <li>The key header is checked and scoped (method, path pattern, principal of the exchange,
 *       which Spring Security's reactive context sets) as on MVC: 400 problems.
 *   <li>The body is read up to the limit (413 past it) and fingerprinted: canonical JSON, a form by
 *       its parameters, a multipart body by its parts, whatever its boundary.
 *   <li>The guard's non-blocking {@link IdempotencyGuard#executeForOutcomeAsync} claims the key; a
 *       repeat is answered from the store byte for byte with {@code Idempotent-Replayed: true}, a
 *       refusal as a problem (409 with {@code Retry-After}, 422, 503).
 *   <li>Once claimed, the handler runs on a decorated exchange ({@code ReplayedExchange}: the body
 *       again, form and multipart data parsed from it). The response is held until it is known
 *       ({@code CapturingServerResponse}), stored if its status is 2xx, 3xx or a 4xx other than
 *       408, 409, 425 and 429, otherwise the key is released; the answer is written to the client
 *       once that outcome is recorded ({@code idempotency.http.record-wait}, 10 s, at most), as on
 *       Spring MVC. A response that nothing wrote (a {@code void} or {@code Mono<Void>} handler) is
 *       completed by the filter, so it is captured. An error that escapes the handler is answered
 *       inside the filter by the application's {@code WebExceptionHandler}s (Boot's error handler:
 *       a {@code ResponseStatusException(404)} is a stored 404, an unmapped exception a released
 *       500), so the answer stored is the one the client got. A request whose handler method was
 *       not invoked ({@link IdempotentEndpointInvocations}: WebFlux refused it while binding,
 *       decoding or validating its arguments, whoever answered the refusal) is released, not
 *       stored; once the method was invoked, its answer follows the rules above, whatever its
 *       exception type. The handler's run is subscribed on its own: a client that goes away does
 *       not cancel it, and its outcome is still recorded.
 *   <li>A client that goes away mid-response (a stream, a body past the bound that went out as it
 *       came) ends the request, not the send: the handler's body is not cancelled but drained to
 *       its end, with the demand of a live client until then and never more than the bound held,
 *       and the outcome is recorded from its own end: completed, stored (with its body if it was
 *       copied whole within the bound); failed by the handler's own error, released. An endless
 *       stream whose client went away therefore runs on until it ends.
 * </ol>
 *
 * <p>A filter after this one (ordered after {@link #ORDER}) that changes the request so that it
 * maps to another handler is refused at dispatch when that handler is guarded ({@link
 * IdempotentEndpointHandlerAdapter}): it would otherwise run unguarded.
 *
 * <p>Thread-safe.
 */
public final class IdempotentEndpointWebFilter
    implements WebFilter, Ordered, SmartInitializingSingleton {

  /** The header that marks a replayed response. */
  public static final String REPLAYED_HEADER = IdempotentEndpointInterceptor.REPLAYED_HEADER;

  /**
   * The exchange attribute that holds the call's {@link SendContext} while a guarded handler runs.
   */
  public static final String SEND_CONTEXT_ATTRIBUTE =
      IdempotentEndpointFilter.SEND_CONTEXT_ATTRIBUTE;

  /** The filter's order: late, after Spring Security's reactive filters. */
  public static final int ORDER = Ordered.LOWEST_PRECEDENCE - 10;

  private final IdempotentEndpoints endpoints;
  private volatile Supplier<List<RequestMappingHandlerMapping>> mappings;
  private volatile Supplier<@Nullable JsonCodecs> json;
  private final String headerName;
  private final int minKeyLength;
  private final int maxBodyBytes;
  private volatile Supplier<List<WebExceptionHandler>> exceptionHandlers;
  private volatile Supplier<List<HttpMessageReader<?>>> readers;
  private final IdempotentEndpointInvocations invocations;
  private final ReactiveEndpointCall call;

  /**
   * Creates the filter.
   *
   * @param guard the guard
   * @param endpoints the annotated handler methods
   * @param mappings the application's annotated-controller mappings, asked for the handler
   * @param json the application's JSON mapper, for fingerprints of JSON bodies; may supply null
   * @param headerName the request header that carries the key, normally {@code Idempotency-Key}
   * @param minKeyLength the shortest key accepted
   * @param maxBodyBytes the largest body read for the fingerprint; a larger one is refused (413)
   * @param maxResponseBytes the largest response body stored; a larger one is sent but not stored
   * @param recordWait how long a complete answer waits for its outcome to be recorded (stored, or
   *     the key released) before it is sent anyway ({@code idempotency.http.record-wait})
   * @param exceptionHandlers the application's {@code WebExceptionHandler}s in order, which answer
   *     an error of a guarded handler inside the filter, so that their answer is the one stored
   * @param readers the application's HTTP message readers, which parse a guarded request's form and
   *     multipart data from the body read for the fingerprint
   * @param invocations the advisor that sees the handler methods invoked; it must advise the
   *     application's controllers (a response of a handler method it did not see invoked is not
   *     stored)
   */
  public IdempotentEndpointWebFilter(
      IdempotencyGuard guard,
      IdempotentEndpoints endpoints,
      Supplier<List<RequestMappingHandlerMapping>> mappings,
      Supplier<@Nullable JsonCodecs> json,
      String headerName,
      int minKeyLength,
      long maxBodyBytes,
      long maxResponseBytes,
      Duration recordWait,
      Supplier<List<WebExceptionHandler>> exceptionHandlers,
      Supplier<List<HttpMessageReader<?>>> readers,
      IdempotentEndpointInvocations invocations) {
    Objects.requireNonNull(guard, "guard must not be null");
    this.endpoints = Objects.requireNonNull(endpoints, "endpoints must not be null");
    this.mappings = Objects.requireNonNull(mappings, "mappings must not be null");
    this.json = Objects.requireNonNull(json, "json must not be null");
    this.headerName = Objects.requireNonNull(headerName, "headerName must not be null");
    if (minKeyLength < 1 || minKeyLength > IdempotencyKey.MAX_LENGTH) {
      throw new IllegalArgumentException(
          "minKeyLength must be 1 to " + IdempotencyKey.MAX_LENGTH + ", was " + minKeyLength);
    }
    this.minKeyLength = minKeyLength;
    if (maxBodyBytes < 0 || maxBodyBytes > Integer.MAX_VALUE - 1) {
      throw new IllegalArgumentException("maxBodyBytes must be 0 to " + (Integer.MAX_VALUE - 1));
    }
    this.maxBodyBytes = (int) maxBodyBytes;
    if (maxResponseBytes < 0) {
      throw new IllegalArgumentException("maxResponseBytes must not be negative");
    }
    Objects.requireNonNull(recordWait, "recordWait must not be null");
    if (recordWait.isNegative() || recordWait.isZero()) {
      throw new IllegalArgumentException("recordWait must be positive, was " + recordWait);
    }
    this.exceptionHandlers =
        Objects.requireNonNull(exceptionHandlers, "exceptionHandlers must not be null");
    this.readers = Objects.requireNonNull(readers, "readers must not be null");
    this.invocations = Objects.requireNonNull(invocations, "invocations must not be null");
    // the suppliers read the fields at each call: afterSingletonsInstantiated replaces them
    this.call =
        new ReactiveEndpointCall(
            guard,
            invocations,
            headerName,
            maxResponseBytes,
            recordWait,
            () -> this.exceptionHandlers.get(),
            () -> this.readers.get());
  }

  @Override
  public int getOrder() {
    return ORDER;
  }

  /**
   * Looks up the application's handler mappings, JSON codecs, exception handlers and readers once
   * the context has made its singletons, before the server takes requests: a first lookup from
   * requests on the event loop would wait for its lock (BlockHound saw an event loop park there
   * when two first requests came at once), and an absent one would be looked up on every request.
   */
  @Override
  public void afterSingletonsInstantiated() {
    List<RequestMappingHandlerMapping> resolvedMappings = mappings.get();
    JsonCodecs resolvedJson = json.get();
    List<WebExceptionHandler> resolvedHandlers = exceptionHandlers.get();
    List<HttpMessageReader<?>> resolvedReaders = readers.get();
    mappings = () -> resolvedMappings;
    json = () -> resolvedJson;
    exceptionHandlers = () -> resolvedHandlers;
    readers = () -> resolvedReaders;
  }

  @Override
  public Mono<Void> filter(ServerWebExchange exchange, WebFilterChain chain) {
    return Flux.fromIterable(mappings.get())
        .concatMap(mapping -> mapping.getHandler(exchange))
        .next()
        .map(
            handler ->
                Optional.ofNullable(
                    handler instanceof HandlerMethod method ? endpoints.find(method) : null))
        .defaultIfEmpty(Optional.empty())
        .flatMap(
            endpoint ->
                endpoint.isPresent()
                    ? guarded(exchange, chain, endpoint.get())
                    : chain.filter(exchange));
  }

  private Mono<Void> guarded(
      ServerWebExchange exchange, WebFilterChain chain, IdempotentEndpoints.Endpoint endpoint) {
    IdempotentEndpointHandlerAdapter.decided(exchange, endpoint.method());
    ServerHttpRequest request = exchange.getRequest();
    Object pattern = exchange.getAttribute(HandlerMapping.BEST_MATCHING_PATTERN_ATTRIBUTE);
    String path =
        pattern instanceof PathPattern parsed
            ? parsed.getPatternString()
            : request.getPath().pathWithinApplication().value();
    String method = request.getMethod().name();
    List<String> fields = CapturingServerResponse.values(request.getHeaders(), headerName);
    return exchange
        .getPrincipal()
        .map(Principal::getName)
        .defaultIfEmpty("")
        .flatMap(
            client -> {
              EndpointKeys.Checked checked =
                  EndpointKeys.check(
                      headerName, fields, endpoint.required(), method, path, client, minKeyLength);
              if (checked instanceof EndpointKeys.Refused refused) {
                return ReactiveAnswers.problem(exchange.getResponse(), refused.problem());
              }
              if (checked instanceof EndpointKeys.Absent) {
                return invocations.unguarded(endpoint.method(), exchange, chain);
              }
              String scoped = ((EndpointKeys.Key) checked).scoped();
              String operation =
                  endpoint.name() != null ? endpoint.name() : EndpointKeys.operation(method, path);
              return body(request)
                  .flatMap(
                      bytes ->
                          ReactiveRequestFingerprint.of(exchange, bytes, json.get(), readers.get())
                              .flatMap(
                                  fingerprint ->
                                      call.claimed(
                                          exchange,
                                          chain,
                                          endpoint,
                                          IdempotencyRequest.of(scoped, endpoint.ttl())
                                              .withFingerprint(fingerprint)
                                              .withOperation(operation),
                                          bytes)))
                  .onErrorResume(
                      DataBufferLimitException.class,
                      tooLarge ->
                          ReactiveAnswers.problem(
                              exchange.getResponse(), EndpointProblem.bodyTooLarge(maxBodyBytes)));
            });
  }

  /** The request body, read in full up to the limit. */
  private Mono<byte[]> body(ServerHttpRequest request) {
    return DataBufferUtils.join(request.getBody(), maxBodyBytes)
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
        .defaultIfEmpty(new byte[0]);
  }
}
