package dev.idempotency.spring.messaging;

import java.time.Duration;
import java.util.ArrayList;
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
 * <p>The listener's manual acknowledgement ({@link KeptAcknowledgment}) is held while a deferral is
 * kept for the delivery: an {@code acknowledge()} that the listener (or Spring Kafka, on the
 * completion of an asynchronous reply's stage) makes after catching a deferral would otherwise
 * commit the record at once ({@code MANUAL_IMMEDIATE}, asynchronous acknowledgements), and a
 * restart or rebalance before the retry would skip it. On Spring Kafka 3 an out-of-order
 * acknowledgement ({@code asyncAcks}) is not held ({@link #SEEK_FORGETS_PENDING_ACKS}): the record
 * still comes back in the running consumer, but its offset may be committed meanwhile.
 *
 * <p>A listener with asynchronous replies (a {@code CompletableFuture} or {@code Mono} return) is
 * left as it is: Spring Kafka wires a retry topic's asynchronous failures to the endpoint's own
 * adapter only where it is the direct delegate of the retry topic's adapter, which a wrapper would
 * hide (the failure logged, the record acknowledged).
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
      // left as it is: a retry topic's container wires an asynchronous reply's failure (its
      // stage's) only to the endpoint's own adapter as the direct delegate of its backoff adapter;
      // behind a wrapper that failure would be logged and its record acknowledged
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
   * the container would have got it from the guard; the acknowledgements held meanwhile are then
   * dropped, and passed on otherwise.
   */
  static void failIfDeferred(
      @Nullable Delivery delivery, @Nullable KeptAcknowledgment acknowledgment) {
    Throwable kept = delivery == null ? null : delivery.deferral().get();
    if (acknowledgment != null) {
      acknowledgment.end(kept == null);
    }
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

  /** Runs the delegate's call, then acts on the deferral kept for the delivery, if any. */
  private static void run(
      @Nullable Delivery delivery, @Nullable KeptAcknowledgment acknowledgment, Runnable call) {
    try {
      call.run();
    } catch (RuntimeException | Error failure) {
      if (acknowledgment != null) {
        acknowledgment.end(false); // the container's error handler decides what is committed
      }
      throw failure;
    }
    failIfDeferred(delivery, acknowledgment);
  }

  /**
   * Whether the container forgets the pending out-of-order acknowledgement ({@code asyncAcks}, and
   * a listener with asynchronous replies) of a record its error handler seeks back: Spring Kafka 4
   * does; 3.3 keeps waiting for it and pauses the partition for good ("Incomplete out of order
   * acks"), so there such an acknowledgement is passed on at once, not held.
   */
  private static final boolean SEEK_FORGETS_PENDING_ACKS = springKafkaMajor() >= 4;

  private static int springKafkaMajor() {
    String version = Acknowledgment.class.getPackage().getImplementationVersion();
    int dot = version == null ? -1 : version.indexOf('.');
    try {
      return dot > 0 ? Integer.parseInt(version.substring(0, dot)) : 0;
    } catch (NumberFormatException e) {
      return 0;
    }
  }

  /**
   * The acknowledgement to hand the delegate: {@code container}'s, held as it must be; {@code null}
   * (the container's as it is) where it is not held.
   */
  private static @Nullable KeptAcknowledgment hold(
      @Nullable Delivery delivery, @Nullable Acknowledgment container) {
    if (delivery == null || container == null) {
      return null;
    }
    if (container.isOutOfOrderCommit() && !SEEK_FORGETS_PENDING_ACKS) {
      return null;
    }
    return new KeptAcknowledgment(delivery.deferral(), container);
  }

  /**
   * A listener's manual acknowledgement, handed to it in place of the container's: each call
   * ({@code acknowledge}, {@code acknowledge(index)}, {@code nack}, {@code nack(index)}) made while
   * a deferral is kept for the delivery is held, in order; one made while none is kept passes the
   * held ones on first, then itself. When the delivery ends ({@link #end}), the held calls are
   * passed on if no deferral is kept and dropped if it is thrown to the container (or the listener
   * failed): the record comes back, and its offset must not have been committed meanwhile. Calls
   * after the end (an asynchronous reply's stage completing later) are passed on or dropped as the
   * end decided. Thread-safe.
   */
  static final class KeptAcknowledgment implements Acknowledgment {
    private final Delivery.KeptDeferral deferral;
    private final Acknowledgment container;
    private final List<java.util.function.Consumer<Acknowledgment>> held = new ArrayList<>();
    private @Nullable Boolean passing; // null until the end; then whether calls are passed on

    KeptAcknowledgment(Delivery.KeptDeferral deferral, Acknowledgment container) {
      this.deferral = deferral;
      this.container = container;
    }

    @Override
    public void acknowledge() {
      call(Acknowledgment::acknowledge);
    }

    @Override
    public void acknowledge(int index) {
      call(ack -> ack.acknowledge(index));
    }

    @Override
    public void nack(Duration sleep) {
      call(ack -> ack.nack(sleep));
    }

    @Override
    public void nack(int index, Duration sleep) {
      call(ack -> ack.nack(index, sleep));
    }

    @Override
    public boolean isOutOfOrderCommit() {
      return container.isOutOfOrderCommit();
    }

    private void call(java.util.function.Consumer<Acknowledgment> call) {
      List<java.util.function.Consumer<Acknowledgment>> pass;
      synchronized (this) {
        if (passing == null && deferral.get() != null) {
          held.add(call);
          return;
        }
        if (Boolean.FALSE.equals(passing)) {
          return;
        }
        pass = new ArrayList<>(held);
        held.clear();
      }
      pass.forEach(each -> each.accept(container));
      call.accept(container);
    }

    /**
     * The delivery ended: passes the held calls on ({@code pass}) or drops them (the record comes
     * back), and so every call from now on.
     */
    void end(boolean pass) {
      List<java.util.function.Consumer<Acknowledgment>> passed;
      synchronized (this) {
        passing = pass;
        passed = pass ? new ArrayList<>(held) : List.of();
        held.clear();
      }
      passed.forEach(each -> each.accept(container));
    }
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
      KeptAcknowledgment held = hold(delivery, acknowledgment);
      Acknowledgment ack = held != null ? held : acknowledgment;
      run(
          delivery,
          held,
          () -> {
            switch (delegateType) {
              case ACKNOWLEDGING_CONSUMER_AWARE -> delegate.onMessage(data, ack, consumer);
              case ACKNOWLEDGING -> delegate.onMessage(data, ack);
              case CONSUMER_AWARE -> delegate.onMessage(data, consumer);
              case SIMPLE -> delegate.onMessage(data);
            }
          });
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
      KeptAcknowledgment held = hold(delivery, acknowledgment);
      Acknowledgment ack = held != null ? held : acknowledgment;
      run(
          delivery,
          held,
          () -> {
            switch (delegateType) {
              case ACKNOWLEDGING_CONSUMER_AWARE -> delegate.onMessage(data, ack, consumer);
              case ACKNOWLEDGING -> delegate.onMessage(data, ack);
              case CONSUMER_AWARE -> delegate.onMessage(data, consumer);
              case SIMPLE -> delegate.onMessage(data);
            }
          });
    }

    @Override
    public void onMessage(
        ConsumerRecords<K, V> records,
        @Nullable Acknowledgment acknowledgment,
        Consumer<K, V> consumer) {
      Delivery delivery = delivery();
      KeptAcknowledgment held = hold(delivery, acknowledgment);
      Acknowledgment ack = held != null ? held : acknowledgment;
      run(delivery, held, () -> delegate.onMessage(records, ack, consumer));
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
