package dev.idempotency;

import java.util.concurrent.CompletionStage;

/**
 * A non-blocking provider call, for {@link IdempotencyGuard#executeAsync}: starts the send and
 * returns a stage that completes with the result to store and replay.
 *
 * @param <T> the result type
 */
@FunctionalInterface
public interface AsyncSender<T> {

  /**
   * Starts the send. Pass {@link SendContext#providerKey()} or {@link SendContext#providerUuid()}
   * to the provider.
   *
   * @param context the key, the provider keys and the attempt number
   * @return a stage with the result (may complete with {@code null}), or completing exceptionally
   *     if the send failed
   * @throws Exception if the send could not even start; treated like a failed stage
   */
  CompletionStage<T> send(SendContext context) throws Exception;

  /**
   * Adapts a blocking {@link Sender}, run on the calling thread.
   *
   * @param sender the blocking sender
   * @param <T> the result type
   * @return an async sender that completes when the blocking one returns
   */
  static <T> AsyncSender<T> of(Sender<T> sender) {
    return context -> java.util.concurrent.CompletableFuture.completedFuture(sender.send(context));
  }
}
