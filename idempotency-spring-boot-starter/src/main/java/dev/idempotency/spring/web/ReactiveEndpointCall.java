package dev.idempotency.spring.web;

import dev.idempotency.AsyncSender;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.Outcome;
import dev.idempotency.SendContext;
import dev.idempotency.spi.AsyncKeyStore;
import dev.idempotency.spi.OperationDeadlines;
import dev.idempotency.spring.PendingCall;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.http.codec.HttpMessageReader;
import org.springframework.web.server.ServerWebExchange;
import org.springframework.web.server.WebExceptionHandler;
import org.springframework.web.server.WebFilterChain;
import org.springframework.web.server.WebHandler;
import org.springframework.web.server.handler.ExceptionHandlingWebHandler;
import reactor.core.publisher.Mono;
import reactor.util.context.ContextView;

/**
 * The guarded call of {@link IdempotentEndpointWebFilter} once a request's key and fingerprint are
 * known: the guard's claim, then the handler's run on a decorated exchange with its response
 * captured, stored or released (steps 3 and 4 of the filter's list).
 */
final class ReactiveEndpointCall {

  // the filter's logger: what it logs is the filter's
  private static final Logger log = LoggerFactory.getLogger(IdempotentEndpointWebFilter.class);

  /**
   * How long a captured answer waits for its outcome (stored or released) to be recorded before it
   * is sent anyway: {@code idempotency.http.record-wait}, 10 s unless set. Its own setting, not
   * derived from another: Spring MVC's bound (the in-flight wait plus a minute) is about how long a
   * request thread may block, and a store's operation timeout bounds one attempt of the write, not
   * the guard's attempts together, nor applies to the in-memory store.
   */
  private final Duration recordWait;

  private final IdempotencyGuard guard;
  private final IdempotentEndpointInvocations invocations;
  private final String headerName;
  private final long maxResponseBytes;
  private final Supplier<List<WebExceptionHandler>> exceptionHandlers;
  private final Supplier<List<HttpMessageReader<?>>> readers;

  /** Whether the guard's store answers without blocking (Redis, in memory): no JDBC. */
  private final boolean nonBlockingStore;

  ReactiveEndpointCall(
      IdempotencyGuard guard,
      IdempotentEndpointInvocations invocations,
      String headerName,
      long maxResponseBytes,
      Duration recordWait,
      Supplier<List<WebExceptionHandler>> exceptionHandlers,
      Supplier<List<HttpMessageReader<?>>> readers) {
    this.guard = guard;
    this.invocations = invocations;
    this.headerName = headerName;
    this.maxResponseBytes = maxResponseBytes;
    this.recordWait = recordWait;
    this.exceptionHandlers = exceptionHandlers;
    this.readers = readers;
    this.nonBlockingStore = guard.store() instanceof AsyncKeyStore;
  }

  /** Asks the guard; runs the handler if this request claimed the key, else answers for it. */
  Mono<Void> claimed(
      ServerWebExchange exchange,
      WebFilterChain chain,
      IdempotentEndpoints.Endpoint endpoint,
      IdempotencyRequest idempotency,
      byte[] body) {
    return Mono.deferContextual(
        reactorContext -> {
          AtomicBoolean ran = new AtomicBoolean();
          CompletableFuture<Void> handled = new CompletableFuture<>();
          CompletableFuture<Void> recorded = new CompletableFuture<>();
          AsyncSender<StoredResponse> sender =
              context -> {
                ran.set(true);
                return handle(
                    exchange, chain, endpoint, body, context, reactorContext, handled, recorded);
              };
          // on a store with a non-blocking API, the call goes on where WebFlux would run it: the
          // request's event loop (the handler subscribed there once the claim is answered, the
          // outcome's write issued there once the handler answered), not handed to the guard's
          // pool and back; a blocking store's calls stay on the guard's bounded executors
          Executor eventLoop =
              nonBlockingStore ? ReactiveEventLoops.of(exchange.getRequest()) : null;
          CompletableFuture<Outcome<StoredResponse>> outcome =
              (eventLoop != null
                      ? guard.executeForOutcomeAsync(
                          idempotency, StoredResponse.CODEC, sender, eventLoop)
                      : guard.executeForOutcomeAsync(idempotency, StoredResponse.CODEC, sender))
                  .toCompletableFuture();
          outcome.whenComplete((answered, failure) -> recorded.complete(null));
          return Mono.fromFuture(outcome.thenApply(o -> o), true)
              .flatMap(
                  answered ->
                      ran.get()
                          ? Mono.fromFuture(handled, true)
                          : ReactiveAnswers.replay(
                              exchange.getResponse(), answered.value(), headerName))
              .onErrorResume(
                  error -> {
                    Throwable cause = PendingCall.unwrap(error);
                    if (ran.get()) {
                      // the handler's own answer (a released 5xx) was written; its error, if any,
                      // goes on to WebFlux's exception handling
                      return Mono.fromFuture(handled, true);
                    }
                    EndpointProblem problem = EndpointProblem.refusal(cause, headerName);
                    if (problem == null) {
                      return Mono.error(cause);
                    }
                    if (problem.status().value() == 503) {
                      log.debug(
                          "The idempotency store is unavailable; answering 503, the handler did"
                              + " not run",
                          cause);
                    }
                    return ReactiveAnswers.problem(exchange.getResponse(), problem);
                  });
        });
  }

  /**
   * Runs the handler on an exchange that replays the body and captures the response. Its run is
   * subscribed on its own: a client that goes away does not cancel the send. An error that escapes
   * the handler is answered here by the application's {@code WebExceptionHandler}s (Boot's error
   * handler, say), as WebFlux would answer it outside the filter, so that the answer the client
   * gets is the one stored or released.
   */
  private CompletableFuture<StoredResponse> handle(
      ServerWebExchange exchange,
      WebFilterChain chain,
      IdempotentEndpoints.Endpoint endpoint,
      byte[] body,
      SendContext context,
      ContextView reactorContext,
      CompletableFuture<Void> handled,
      CompletableFuture<Void> recorded) {
    CompletableFuture<StoredResponse> captured = new CompletableFuture<>();
    AtomicBoolean refusedBeforeTheHandler = new AtomicBoolean();
    IdempotentEndpointInvocations.Expected expected = invocations.expect(endpoint.method());
    CapturingServerResponse response =
        new CapturingServerResponse(
            exchange.getResponse(),
            endpoint.headers(),
            maxResponseBytes,
            captured,
            Mono.defer(
                () ->
                    recorded.isDone()
                        ? Mono.empty()
                        : Mono.fromFuture(atMostRecordWait(recorded), true)));
    ReplayedExchange replayed = ReplayedExchange.of(exchange, body, response, readers.get());
    replayed.getAttributes().put(IdempotentEndpointWebFilter.SEND_CONTEXT_ATTRIBUTE, context);
    WebHandler handler =
        decorated ->
            chain
                .filter(decorated)
                .doOnError(
                    error ->
                        refusedBeforeTheHandler.set(
                            HandlerRefusals.isArgumentRefusal(error, endpoint.method())));
    Mono<Void> run =
        new ExceptionHandlingWebHandler(handler, exceptionHandlers.get())
            .handle(replayed)
            // A handler with no body to write (a Mono<Void> or void method with @ResponseStatus,
            // a status set on the ServerHttpResponse parameter) leaves its response unwritten:
            // WebFlux's HttpWebHandlerAdapter completes the server's response after the whole
            // chain, past this decorator. Complete it here, as that adapter would, so that it is
            // captured (a response already written or completed is left as it is).
            .then(Mono.defer(response::setComplete))
            .onErrorResume(error -> replayed.cleanupMultipart().then(Mono.error(error)))
            .then(Mono.defer(replayed::cleanupMultipart))
            .contextWrite(reactorContext);
    // The handler method is invoked inside this subscribe call when its arguments are at hand (the
    // body was read already): the thread is marked for this request meanwhile, so that only this
    // request's own invocation counts as its evidence (IdempotentEndpointInvocations says why)
    invocations.subscribing(
        expected,
        () ->
            run.subscribe(
                null,
                error -> {
                  captured.completeExceptionally(error);
                  handled.completeExceptionally(error);
                },
                () -> {
                  captured.complete(null);
                  handled.complete(null);
                }));
    // the captured answer goes to the client once its outcome is recorded, as on Spring MVC: a
    // stored one once it is written (a process that dies after the client got it leaves no key in
    // progress, whose next retry would be a second send), a released one once the release is (so
    // that the client's corrected retry under the same key runs instead of meeting the old claim)
    return captured.thenCompose(
        written ->
            storable(
                written,
                refusedBeforeTheHandler.get() || !invocations.mayHaveBeenInvoked(expected)));
  }

  /**
   * {@code recorded}, completed anyway once {@link #recordWait} has passed: watched by {@link
   * OperationDeadlines}' one sweeping thread, not by a timer task per request.
   */
  private CompletableFuture<Void> atMostRecordWait(CompletableFuture<Void> recorded) {
    OperationDeadlines.Watch watch =
        OperationDeadlines.watch(recordWait, () -> recorded.complete(null));
    recorded.whenComplete((done, failure) -> watch.done());
    return recorded;
  }

  /**
   * A response worth keeping, or a failure that releases the key: a 5xx, a transient 4xx, or a
   * request whose handler method was not invoked (refused while WebFlux bound, decoded or validated
   * its arguments, whoever answered the refusal: Boot's error handler or the application's own
   * {@code @ExceptionHandler}).
   */
  private static CompletableFuture<StoredResponse> storable(
      @Nullable StoredResponse response, boolean notInvoked) {
    if (notInvoked) {
      return CompletableFuture.failedFuture(
          new IllegalStateException("the handler method was not invoked: releases the key"));
    }
    if (response == null) {
      return CompletableFuture.failedFuture(
          new CompletionException(new IllegalStateException("the handler wrote no response")));
    }
    int status = response.status();
    return StoredStatuses.isStored(status)
        ? CompletableFuture.completedFuture(response)
        : CompletableFuture.failedFuture(
            new IllegalStateException("status " + status + " releases the key"));
  }
}
