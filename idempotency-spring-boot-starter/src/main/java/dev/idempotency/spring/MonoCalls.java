package dev.idempotency.spring;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.Outcome;
import dev.idempotency.ResultCodec;
import dev.idempotency.SendContext;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import org.aopalliance.intercept.MethodInvocation;
import org.jspecify.annotations.Nullable;
import org.springframework.aop.ProxyMethodInvocation;
import reactor.core.publisher.Mono;
import reactor.util.context.ContextView;

/**
 * Runs an {@link Idempotent} method that returns a {@code Mono}. A {@code Mono} is a recipe, so
 * nothing happens when the method is called: each subscription is one call of the guard's
 * non-blocking {@link IdempotencyGuard#executeForOutcomeAsync}, and the guard makes it once per key
 * however often the {@code Mono} is subscribed (a later subscription replays the stored result; a
 * concurrent one waits for the first, as any repeat does).
 *
 * <ol>
 *   <li>On subscription the guard claims the key without blocking the subscribing thread (a Netty
 *       event loop, a {@code parallel} worker): Redis and the in-memory store answer
 *       asynchronously, a JDBC store is called on the guard's bounded blocking-store executor.
 *   <li>Once claimed, the method runs (on a copy of the invocation, so that every subscription runs
 *       the whole interceptor chain) and its {@code Mono} is subscribed with the subscriber's
 *       Reactor {@code Context}, so the reactive security context and tracing reach it.
 *   <li>Its value is recorded and emitted; its error releases the key (or is stored, if the guard's
 *       classifier calls it permanent) and reaches the subscriber as the method signalled it.
 *   <li>A subscriber that cancels before the method started releases the claim and nothing runs.
 *       One that cancels later only stops listening: the method's {@code Mono} is not cancelled,
 *       its outcome is still recorded, and a retry replays it (the provider may have accepted the
 *       send).
 * </ol>
 *
 * <p>Loaded only when a method returns a {@code Mono}, so that the starter works without Reactor.
 */
final class MonoCalls {

  private MonoCalls() {}

  static Mono<Object> guarded(
      IdempotencyGuard guard,
      IdempotentMethod method,
      MethodInvocation invocation,
      IdempotencyRequest request,
      ResultCodec<Object> codec) {
    if (!(invocation instanceof ProxyMethodInvocation proxied)) {
      throw new IllegalStateException(
          method.name + " returns a Mono but is not called through a Spring AOP proxy");
    }
    return Mono.deferContextual(
        subscriberContext -> {
          AtomicBoolean cancelled = new AtomicBoolean();
          Throwable[] thrown = new Throwable[1];
          CompletableFuture<Outcome<Object>> outcome =
              guard
                  .executeForOutcomeAsync(
                      request,
                      codec,
                      context ->
                          cancelled.get()
                              ? CompletableFuture.failedFuture(
                                  new CancellationException(
                                      "the subscriber cancelled before the method started"))
                              : send(method, proxied, context, subscriberContext, thrown))
                  .toCompletableFuture();
          // a dependent stage: a subscriber's cancel cancels it, and the guard then sends no
          // claim it has not sent yet (still queued for a blocking store); a claim sent already
          // goes on, and a granted one reaches the sender above, which refuses to start
          CompletableFuture<@Nullable Object> value = outcome.thenApply(Outcome::value);
          return Mono.fromFuture(value)
              .onErrorMap(error -> IdempotentInvoker.ownFailure(PendingCall.unwrap(error), thrown))
              .doOnCancel(() -> cancelled.set(true));
        });
  }

  /**
   * A call refused before anything ran (its key or fingerprint), as the {@code Mono} the method
   * returns: each subscription gets the refusal as its error.
   */
  static Mono<Object> refused(RuntimeException refusal) {
    return Mono.error(refusal);
  }

  /** Runs the method and subscribes to its {@code Mono} with the subscriber's context. */
  private static CompletableFuture<@Nullable Object> send(
      IdempotentMethod method,
      ProxyMethodInvocation invocation,
      SendContext context,
      ContextView subscriberContext,
      Throwable[] thrown)
      throws Exception {
    Object returned =
        IdempotentInvoker.proceed(method, invocation.invocableClone(), context, thrown);
    if (returned == null) {
      return CompletableFuture.completedFuture(null);
    }
    @SuppressWarnings("unchecked")
    Mono<Object> mono = (Mono<Object>) returned;
    CompletableFuture<@Nullable Object> result = new CompletableFuture<>();
    mono.contextWrite(subscriberContext)
        .subscribe(
            result::complete,
            error -> {
              thrown[0] = error;
              result.completeExceptionally(error);
            },
            () -> result.complete(null));
    return result;
  }
}
