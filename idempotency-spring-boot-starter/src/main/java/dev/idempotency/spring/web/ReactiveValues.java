package dev.idempotency.spring.web;

import java.util.concurrent.CompletableFuture;
import org.jspecify.annotations.Nullable;
import org.reactivestreams.Publisher;
import org.reactivestreams.Subscriber;
import org.reactivestreams.Subscription;

/**
 * A reactive value's publisher subscribed at once, as Spring MVC's reactive return value handler
 * subscribes one it got, and followed as a {@code CompletableFuture}. Loaded only when such a value
 * comes, so an application without Reactive Streams on its class path never needs them.
 */
final class ReactiveValues {

  private ReactiveValues() {}

  /**
   * A single-value publisher (a {@code Mono}): completed with its first value, or with null if it
   * completes empty, or with its failure.
   */
  static CompletableFuture<@Nullable Object> firstValue(Publisher<?> publisher) {
    return subscribed(publisher, true);
  }

  /**
   * A stream (a {@code Flux}) drained to its end, as Spring MVC collects one: completed with null
   * when it completes, or with its failure.
   */
  static CompletableFuture<@Nullable Object> drained(Publisher<?> publisher) {
    return subscribed(publisher, false);
  }

  private static CompletableFuture<@Nullable Object> subscribed(
      Publisher<?> publisher, boolean completesWithFirstValue) {
    CompletableFuture<@Nullable Object> future = new CompletableFuture<>();
    publisher.subscribe(
        new Subscriber<Object>() {
          @Override
          public void onSubscribe(Subscription subscription) {
            subscription.request(Long.MAX_VALUE);
          }

          @Override
          public void onNext(Object next) {
            if (completesWithFirstValue) {
              future.complete(next);
            }
          }

          @Override
          public void onError(Throwable failure) {
            future.completeExceptionally(failure);
          }

          @Override
          public void onComplete() {
            future.complete(null);
          }
        });
    return future;
  }
}
