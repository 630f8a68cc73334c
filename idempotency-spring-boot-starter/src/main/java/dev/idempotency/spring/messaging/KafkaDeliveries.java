package dev.idempotency.spring.messaging;

import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.KeyStoreException;
import dev.idempotency.spring.InvalidKeyException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.jspecify.annotations.Nullable;
import org.springframework.kafka.KafkaException;
import org.springframework.kafka.config.AbstractKafkaListenerContainerFactory;
import org.springframework.kafka.listener.AbstractMessageListenerContainer;
import org.springframework.kafka.listener.BatchInterceptor;
import org.springframework.kafka.listener.BatchListenerFailedException;
import org.springframework.kafka.listener.CommonDelegatingErrorHandler;
import org.springframework.kafka.listener.CommonErrorHandler;
import org.springframework.kafka.listener.CompositeBatchInterceptor;
import org.springframework.kafka.listener.CompositeRecordInterceptor;
import org.springframework.kafka.listener.DefaultErrorHandler;
import org.springframework.kafka.listener.ExceptionClassifier;
import org.springframework.kafka.listener.MessageListenerContainer;
import org.springframework.kafka.listener.RecordInterceptor;
import org.springframework.kafka.support.Acknowledgment;
import org.springframework.util.backoff.ExponentialBackOff;

/**
 * The Spring Kafka side of {@link IdempotentListener}.
 *
 * <ul>
 *   <li>{@link Interceptor}, a record and batch interceptor of the container, binds the records it
 *       hands to the listener (for header keys and batch failures);
 *   <li>{@link #errorHandler} wraps a container's error handler so that a deferred delivery is
 *       retried by a {@link DefaultErrorHandler} of its own, with the messaging backoff and no
 *       limit (so never skipped nor sent to a dead-letter topic for that reason), a message without
 *       a usable key ({@link InvalidIdempotencyKeyException}) is registered as not retryable with
 *       the container's {@link DefaultErrorHandler} (its recoverer takes it at once), while every
 *       other failure goes to the container's handler (Spring Kafka's default: ten tries, then
 *       logged and skipped; or the application's own, with its recoverer) as before.
 * </ul>
 *
 * A batch listener's failure is a {@link BatchListenerFailedException} naming the index in the
 * batch the container polled (not in the list a {@code RecordFilterStrategy} left the listener):
 * the records before it are committed, it and the rest come back.
 */
final class KafkaDeliveries {

  private KafkaDeliveries() {}

  /** Batch failures as Spring Kafka's {@link BatchListenerFailedException}. */
  static final Delivery.BatchFailures BATCH_FAILURES =
      new Delivery.BatchFailures() {
        @Override
        public RuntimeException failedAt(int index, Throwable cause) {
          return new BatchListenerFailedException(String.valueOf(cause.getMessage()), cause, index);
        }

        @Override
        public int indexIn(Throwable failure, List<?> elements) {
          for (Throwable t = failure; t != null; t = t.getCause() == t ? null : t.getCause()) {
            if (t instanceof BatchListenerFailedException failed) {
              ConsumerRecord<?, ?> record = failed.getRecord();
              if (record != null) {
                for (int i = 0; i < elements.size(); i++) {
                  if (elements.get(i) == record) {
                    return i;
                  }
                }
                return -1;
              }
              int index = failed.getIndex();
              return index >= 0 && index < elements.size() ? index : -1;
            }
          }
          return -1;
        }
      };

  /**
   * Adds {@code ours} last to the record and batch interceptors of a Spring Kafka container factory
   * or container, unless they already end with it, composed after the application's interceptor (so
   * it binds the record the listener gets). An application's {@code ContainerCustomizer} runs
   * inside the factory's {@code createListenerContainer}, after the factory's interceptors were
   * copied to the container, and may replace them there; this runs on the container after it
   * ({@link CreatedContainers}) and again before it starts. An application's own composite that
   * includes the starter's interceptor gets it once more, which binds the same record again:
   * harmless.
   */
  @SuppressWarnings({"unchecked", "rawtypes"})
  static void includeInterceptor(Object factoryOrContainer, Interceptor ours) {
    RecordInterceptor record =
        (RecordInterceptor)
            ListenerContainerHooks.current(
                factoryOrContainer, "getRecordInterceptor", "recordInterceptor");
    if (!(record instanceof Interceptor || record instanceof WithDeliveryRecords)) {
      RecordInterceptor withOurs = record == null ? ours : new WithDeliveryRecords(record, ours);
      if (factoryOrContainer instanceof AbstractKafkaListenerContainerFactory factory) {
        factory.setRecordInterceptor(withOurs);
      } else if (factoryOrContainer instanceof AbstractMessageListenerContainer container) {
        container.setRecordInterceptor(withOurs);
      }
    }
    BatchInterceptor batch =
        (BatchInterceptor)
            ListenerContainerHooks.current(
                factoryOrContainer, "getBatchInterceptor", "batchInterceptor");
    if (!(batch instanceof Interceptor || batch instanceof WithDeliveryBatches)) {
      BatchInterceptor withOurs = batch == null ? ours : new WithDeliveryBatches(batch, ours);
      if (factoryOrContainer instanceof AbstractKafkaListenerContainerFactory factory) {
        factory.setBatchInterceptor(withOurs);
      } else if (factoryOrContainer instanceof AbstractMessageListenerContainer container) {
        container.setBatchInterceptor(withOurs);
      }
    }
  }

  /** An application's record interceptor, then the starter's {@link Interceptor}. */
  static final class WithDeliveryRecords<K, V> extends CompositeRecordInterceptor<K, V> {
    WithDeliveryRecords(RecordInterceptor<K, V> application, Interceptor<K, V> ours) {
      super(application, ours);
    }
  }

  /** An application's batch interceptor, then the starter's {@link Interceptor}. */
  static final class WithDeliveryBatches<K, V> extends CompositeBatchInterceptor<K, V> {
    WithDeliveryBatches(BatchInterceptor<K, V> application, Interceptor<K, V> ours) {
      super(application, ours);
    }
  }

  /**
   * Binds the records the container hands to the listener on its thread. Added last to the
   * interceptors of each container factory and container ({@link #includeInterceptor}), so it binds
   * what the listener gets.
   *
   * @param <K> the key type
   * @param <V> the value type
   */
  static final class Interceptor<K, V> implements RecordInterceptor<K, V>, BatchInterceptor<K, V> {

    @Override
    public ConsumerRecord<K, V> intercept(ConsumerRecord<K, V> record, Consumer<K, V> consumer) {
      Delivery.bind(
          new Delivery(List.of(Messages.kafkaHeaders(record)), false, Delivery.WHOLE_BATCH, true));
      return record;
    }

    @Override
    public void afterRecord(ConsumerRecord<K, V> record, Consumer<K, V> consumer) {
      Delivery.restore(null);
    }

    @Override
    public ConsumerRecords<K, V> intercept(ConsumerRecords<K, V> records, Consumer<K, V> consumer) {
      List<Map<String, Object>> headers = new ArrayList<>(records.count());
      List<ConsumerRecord<K, V>> polled = new ArrayList<>(records.count());
      for (ConsumerRecord<K, V> record : records) {
        headers.add(Messages.kafkaHeaders(record));
        polled.add(record);
      }
      // a RecordFilterStrategy may hand the listener fewer: its elements are found among these
      Delivery.bind(new Delivery(headers, true, BATCH_FAILURES, polled, true));
      return records;
    }

    @Override
    public void success(ConsumerRecords<K, V> records, Consumer<K, V> consumer) {
      Delivery.restore(null);
    }

    @Override
    public void failure(
        ConsumerRecords<K, V> records, Exception exception, Consumer<K, V> consumer) {
      Delivery.restore(null);
    }

    @Override
    public void clearThreadState(Consumer<?, ?> consumer) {
      Delivery.restore(null);
    }
  }

  /**
   * The manual acknowledgement a batch listener gets ({@link HeldAcknowledgment}): its {@code
   * acknowledge()} and {@code nack(index, sleep)} are held for the starter to pass on; an
   * acknowledgement up to an index is passed on at once, as the polled message's index.
   */
  static final class HeldBatchAcknowledgment implements Acknowledgment, HeldAcknowledgment {
    private final Object[] arguments;
    private final int argument;
    private final Acknowledgment container;
    private final int size;
    private final java.util.function.IntUnaryOperator polledIndex;
    private boolean acknowledged;
    private int nackedAt = -1;
    private java.time.@Nullable Duration nackSleep;

    HeldBatchAcknowledgment(
        Object[] arguments,
        int argument,
        Acknowledgment container,
        int size,
        java.util.function.IntUnaryOperator polledIndex) {
      this.arguments = arguments;
      this.argument = argument;
      this.container = container;
      this.size = size;
      this.polledIndex = polledIndex;
      arguments[argument] = this;
    }

    @Override
    public synchronized void acknowledge() {
      acknowledged = true;
    }

    @Override
    public void acknowledge(int index) {
      container.acknowledge(polledIndex.applyAsInt(inList(index)));
    }

    @Override
    public synchronized void nack(int index, java.time.Duration sleep) {
      nackedAt = inList(index);
      nackSleep = sleep;
    }

    @Override
    public void nack(java.time.Duration sleep) {
      container.nack(sleep);
    }

    @Override
    public boolean isOutOfOrderCommit() {
      return container.isOutOfOrderCommit();
    }

    private int inList(int index) {
      if (index < 0 || index >= size) {
        throw new IllegalArgumentException(
            "index " + index + " out of bounds: the listener got " + size + " message(s)");
      }
      return index;
    }

    @Override
    public synchronized boolean acknowledged() {
      return acknowledged;
    }

    @Override
    public synchronized int nackedAt() {
      return nackedAt;
    }

    @Override
    public void passAcknowledgement() {
      container.acknowledge();
    }

    @Override
    public synchronized void passNack(int index) {
      container.nack(index, nackSleep != null ? nackSleep : java.time.Duration.ZERO);
    }

    @Override
    public void restore() {
      arguments[argument] = container;
    }
  }

  /** The manual acknowledgement a record listener gets ({@link HeldNack}). */
  static final class HeldRecordAcknowledgment implements Acknowledgment, HeldNack {
    private final Object[] arguments;
    private final int argument;
    private final Acknowledgment container;
    private java.time.@Nullable Duration nackSleep;

    HeldRecordAcknowledgment(Object[] arguments, int argument, Acknowledgment container) {
      this.arguments = arguments;
      this.argument = argument;
      this.container = container;
      arguments[argument] = this;
    }

    @Override
    public void acknowledge() {
      container.acknowledge();
    }

    @Override
    public synchronized void nack(java.time.Duration sleep) {
      nackSleep = sleep;
    }

    @Override
    public void acknowledge(int index) {
      container.acknowledge(index);
    }

    @Override
    public void nack(int index, java.time.Duration sleep) {
      container.nack(index, sleep);
    }

    @Override
    public boolean isOutOfOrderCommit() {
      return container.isOutOfOrderCommit();
    }

    @Override
    public synchronized boolean nacked() {
      return nackSleep != null;
    }

    @Override
    public synchronized void passNack() {
      container.nack(nackSleep != null ? nackSleep : java.time.Duration.ZERO);
    }

    @Override
    public void restore() {
      arguments[argument] = container;
    }
  }

  /** A container's error handler with deferred deliveries retried without limit. */
  static final class DeferringErrorHandler extends CommonDelegatingErrorHandler {
    private final CommonErrorHandler containerHandler;
    private final CommonErrorHandler deferring;

    DeferringErrorHandler(CommonErrorHandler containerHandler, CommonErrorHandler deferring) {
      super(containerHandler);
      this.containerHandler = containerHandler;
      this.deferring = deferring;
      setCauseChainTraversing(true);
      for (Class<? extends Throwable> deferral : DEFERRALS) {
        addDelegate(deferral, deferring);
      }
    }

    /**
     * Passed on as Spring Kafka's delegating handler does; in a Kafka container transaction, a
     * batch that stopped partway then commits the records before the stop rather than roll back
     * their sends ({@link KafkaTransactionBatchStops}).
     */
    @Override
    public void handleBatch(
        Exception thrownException,
        ConsumerRecords<?, ?> data,
        Consumer<?, ?> consumer,
        MessageListenerContainer container,
        Runnable invokeListener) {
      try {
        super.handleBatch(thrownException, data, consumer, container, invokeListener);
      } catch (RuntimeException handlerFailure) {
        if (!KafkaTransactionBatchStops.commitBeforeStop(
            handlerFailure, thrownException, data, consumer, container)) {
          throw handlerFailure;
        }
      }
    }

    /**
     * A container whose handler does not seek ({@code seekAfterError(false)}, or a handler that is
     * not a {@code DefaultErrorHandler}) calls this for a batch; Spring Kafka's delegating handler
     * does not pass it on (its default calls {@code handleBatch} and returns no records, so the
     * records the delegate handed back were committed unsent: KafkaBatchDeferralHandlerProbeTest).
     * Passed on to the handler {@code handleBatch} would have chosen.
     */
    @Override
    public <K, V> ConsumerRecords<K, V> handleBatchAndReturnRemaining(
        Exception thrownException,
        ConsumerRecords<?, ?> data,
        Consumer<?, ?> consumer,
        MessageListenerContainer container,
        Runnable invokeListener) {
      CommonErrorHandler handler = isDeferral(thrownException) ? deferring : containerHandler;
      return handler.handleBatchAndReturnRemaining(
          thrownException, data, consumer, container, invokeListener);
    }

    /** Whether {@code failure} or a cause of it is a deferral's, as the delegates are chosen. */
    private static boolean isDeferral(Throwable failure) {
      for (Throwable t = failure; t != null; t = t.getCause() == t ? null : t.getCause()) {
        for (Class<? extends Throwable> deferral : DEFERRALS) {
          if (deferral.isInstance(t)) {
            return true;
          }
        }
      }
      return false;
    }
  }

  /** The failures of a deferred delivery, retried by the deferrals' handler. */
  private static final List<Class<? extends Throwable>> DEFERRALS =
      List.of(
          DeferredDeliveryException.class,
          IdempotencyInProgressException.class,
          KeyStoreException.class);

  /**
   * The container's handler ({@code null}: Spring Kafka's default, a {@link DefaultErrorHandler}),
   * with deferred deliveries going to a handler of their own that retries them with {@code backOff}
   * and never gives up.
   */
  static CommonErrorHandler errorHandler(
      @Nullable CommonErrorHandler containerHandler, DeliveryBackOff backOff) {
    if (containerHandler instanceof DeferringErrorHandler) {
      return containerHandler;
    }
    CommonErrorHandler fallback =
        containerHandler != null ? containerHandler : new DefaultErrorHandler();
    if (fallback instanceof ExceptionClassifier classifier) {
      // a poison message: straight to the recoverer (dead-letter topic, or logged and skipped)
      classifier.addNotRetryableExceptions(
          InvalidIdempotencyKeyException.class, InvalidKeyException.class);
    }
    ExponentialBackOff exponential =
        new ExponentialBackOff(backOff.initial().toMillis(), backOff.multiplier());
    exponential.setMaxInterval(backOff.max().toMillis());
    exponential.setMaxElapsedTime(Long.MAX_VALUE);
    DefaultErrorHandler deferring =
        new DefaultErrorHandler(
            (record, exception) -> {
              // never called: the backoff has no end
            },
            exponential);
    // nothing is fatal to a deferral: Spring Kafka's default classification walks the cause chain,
    // and a store failure caused by a ClassCastException (a default fatal exception) would get no
    // retry and be skipped unsent by the recoverer above (KafkaDeferralFatalCauseProbeTest)
    deferring.setClassifications(Map.of(), true);
    deferring.setAckAfterHandle(fallback.isAckAfterHandle());
    deferring.setSeekAfterError(fallback.seeksAfterHandling());
    // the interceptor logs each deferral, naming the listener; the retry itself is routine
    deferring.setLogLevel(KafkaException.Level.DEBUG);
    return new DeferringErrorHandler(fallback, deferring);
  }
}
