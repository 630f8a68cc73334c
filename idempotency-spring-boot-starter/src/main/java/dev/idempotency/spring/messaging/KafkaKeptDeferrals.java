package dev.idempotency.spring.messaging;

import java.util.List;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.jspecify.annotations.Nullable;
import org.springframework.kafka.listener.AbstractMessageListenerContainer;
import org.springframework.kafka.listener.AcknowledgingConsumerAwareMessageListener;
import org.springframework.kafka.listener.BatchAcknowledgingConsumerAwareMessageListener;
import org.springframework.kafka.listener.BatchMessageListener;
import org.springframework.kafka.listener.DelegatingMessageListener;
import org.springframework.kafka.listener.MessageListener;
import org.springframework.kafka.listener.adapter.AbstractDelegatingMessageListenerAdapter;
import org.springframework.kafka.listener.adapter.AsyncRepliesAware;
import org.springframework.kafka.support.Acknowledgment;

/**
 * The Spring Kafka side of {@link Delivery.KeptDeferral}: a container's message listener, wrapped,
 * fails the delivery with the deferral the guard kept for it when the listener returned, as if the
 * listener had thrown it: an application's advice on the listener bean, ordered before the guard,
 * that drops failures ("log and continue"), or an unguarded listener that calls a guarded method
 * and catches what it throws, would otherwise have the record (or batch) committed unsent while the
 * store is down or its key in flight elsewhere. The container's error handler, wrapped by the
 * starter ({@link KafkaDeliveries#errorHandler}), then seeks and retries it with the messaging
 * backoff, without limit. The wrapper runs inside the starter's interceptor ({@link
 * KafkaDeliveries.Interceptor}), which binds the delivery; it calls the listener it wraps with the
 * arguments of that listener's own type, whoever calls it (the container, or an adapter that wraps
 * it in turn, such as the retry topics' one).
 *
 * <p>A listener with asynchronous replies (a {@code CompletableFuture} or {@code Mono} return) is
 * left as it is: Spring Kafka wires its failures to the container's outer listener, which the
 * wrapper would hide.
 */
final class KafkaKeptDeferrals {

  private KafkaKeptDeferrals() {}

  /**
   * Wraps the message listener of a Spring Kafka container (before it starts: the container reads
   * it then); applying it twice changes nothing.
   */
  @SuppressWarnings({"unchecked", "rawtypes"})
  static void wrapListenerOf(AbstractMessageListenerContainer<?, ?> container) {
    Object listener = container.getContainerProperties().getMessageListener();
    if (listener == null || isWrapped(listener)) {
      return;
    }
    if (listener instanceof AsyncRepliesAware async && async.isAsyncReplies()) {
      return;
    }
    if (listener instanceof BatchMessageListener batch) {
      container.setupMessageListener(new Batch<>(batch));
    } else if (listener instanceof MessageListener record) {
      container.setupMessageListener(new Record<>(record));
    }
  }

  /** Whether {@code listener}, or one it delegates to, is already wrapped. */
  private static boolean isWrapped(@Nullable Object listener) {
    for (Object each = listener; each != null; ) {
      if (each instanceof Record<?, ?> || each instanceof Batch<?, ?>) {
        return true;
      }
      each =
          each instanceof DelegatingMessageListener<?> delegating ? delegating.getDelegate() : null;
    }
    return false;
  }

  /** The delivery the starter's interceptor bound for the listener about to run, if any. */
  private static @Nullable Delivery delivery() {
    return Delivery.current();
  }

  /**
   * Fails the delivery with the deferral kept for it, if the listener returned with one kept: as
   * the container would have got it from the guard.
   */
  static void failIfDeferred(@Nullable Delivery delivery) {
    if (delivery == null) {
      return;
    }
    Throwable kept = delivery.deferral().get();
    if (kept == null) {
      return;
    }
    if (kept instanceof RuntimeException runtime) {
      throw runtime;
    }
    if (kept instanceof Error error) {
      throw error;
    }
    throw new IllegalStateException("deferred", kept);
  }

  /**
   * A record listener, wrapped. It takes every argument a caller has (it is an acknowledging,
   * consumer-aware listener) and calls its delegate with those of the delegate's own type ({@code
   * delegateType}), as Spring Kafka's delegating adapters do: a container calls it with the
   * arguments of its innermost listener's type, but an adapter that wraps it in turn (the retry
   * topics' {@code KafkaBackoffAwareMessageListenerAdapter}) calls it by its own type, and a
   * messaging adapter refuses any call but its own form ("Container should never call this").
   */
  static final class Record<K, V>
      extends AbstractDelegatingMessageListenerAdapter<MessageListener<K, V>>
      implements AcknowledgingConsumerAwareMessageListener<K, V>, AsyncRepliesAware {

    Record(MessageListener<K, V> delegate) {
      super(delegate);
    }

    @Override
    public void onMessage(ConsumerRecord<K, V> data) {
      onMessage(data, null, null);
    }

    @Override
    public void onMessage(ConsumerRecord<K, V> data, @Nullable Acknowledgment acknowledgment) {
      onMessage(data, acknowledgment, null);
    }

    @Override
    public void onMessage(ConsumerRecord<K, V> data, @Nullable Consumer<?, ?> consumer) {
      onMessage(data, null, consumer);
    }

    @Override
    public void onMessage(
        ConsumerRecord<K, V> data,
        @Nullable Acknowledgment acknowledgment,
        @Nullable Consumer<?, ?> consumer) {
      Delivery delivery = delivery();
      switch (delegateType) {
        case ACKNOWLEDGING_CONSUMER_AWARE -> delegate.onMessage(data, acknowledgment, consumer);
        case ACKNOWLEDGING -> delegate.onMessage(data, acknowledgment);
        case CONSUMER_AWARE -> delegate.onMessage(data, consumer);
        case SIMPLE -> delegate.onMessage(data);
      }
      failIfDeferred(delivery);
    }

    @Override
    public boolean isAsyncReplies() {
      return delegate instanceof AsyncRepliesAware async && async.isAsyncReplies();
    }
  }

  /** A batch listener, wrapped; it calls its delegate by the delegate's own type, as above. */
  static final class Batch<K, V>
      extends AbstractDelegatingMessageListenerAdapter<BatchMessageListener<K, V>>
      implements BatchAcknowledgingConsumerAwareMessageListener<K, V>, AsyncRepliesAware {

    Batch(BatchMessageListener<K, V> delegate) {
      super(delegate);
    }

    @Override
    public void onMessage(List<ConsumerRecord<K, V>> data) {
      onMessage(data, null, null);
    }

    @Override
    public void onMessage(
        List<ConsumerRecord<K, V>> data, @Nullable Acknowledgment acknowledgment) {
      onMessage(data, acknowledgment, null);
    }

    @Override
    public void onMessage(List<ConsumerRecord<K, V>> data, @Nullable Consumer<?, ?> consumer) {
      onMessage(data, null, consumer);
    }

    @Override
    public void onMessage(
        List<ConsumerRecord<K, V>> data,
        @Nullable Acknowledgment acknowledgment,
        @Nullable Consumer<?, ?> consumer) {
      Delivery delivery = delivery();
      switch (delegateType) {
        case ACKNOWLEDGING_CONSUMER_AWARE -> delegate.onMessage(data, acknowledgment, consumer);
        case ACKNOWLEDGING -> delegate.onMessage(data, acknowledgment);
        case CONSUMER_AWARE -> delegate.onMessage(data, consumer);
        case SIMPLE -> delegate.onMessage(data);
      }
      failIfDeferred(delivery);
    }

    @Override
    public void onMessage(
        ConsumerRecords<K, V> records,
        @Nullable Acknowledgment acknowledgment,
        Consumer<K, V> consumer) {
      Delivery delivery = delivery();
      delegate.onMessage(records, acknowledgment, consumer);
      failIfDeferred(delivery);
    }

    @Override
    public boolean wantsPollResult() {
      return delegate.wantsPollResult();
    }

    @Override
    public boolean isAsyncReplies() {
      return delegate instanceof AsyncRepliesAware async && async.isAsyncReplies();
    }
  }
}
