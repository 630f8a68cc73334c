package dev.idempotency.spring.messaging;

import dev.idempotency.IdempotencyStoredFailureException;
import dev.idempotency.spring.InvalidKeyException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.aopalliance.aop.Advice;
import org.aopalliance.intercept.MethodInterceptor;
import org.aopalliance.intercept.MethodInvocation;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.amqp.AmqpRejectAndDontRequeueException;
import org.springframework.amqp.ImmediateRequeueAmqpException;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.core.MessageProperties;
import org.springframework.amqp.rabbit.listener.AbstractMessageListenerContainer;
import org.springframework.aop.Advisor;
import org.springframework.aop.framework.Advised;

/**
 * The Spring AMQP side of {@link IdempotentListener}: an advice of the listener container (where
 * Spring AMQP's own retry interceptors sit), first in the chain, around each delivery of a message
 * or batch, with a second part ({@link #LAST}) last in the chain, right around the listener.
 *
 * <ul>
 *   <li>binds the delivered messages' headers to the thread, for header keys, as a delivery on the
 *       container's consumer thread (an interrupt a guarded send leaves on it is cleared: {@link
 *       ConsumerThreadInterrupts});
 *   <li>a deferred delivery (the key in flight elsewhere, the store down or refused by the guard's
 *       outage breaker) waits the messaging backoff on the consumer's thread, counted per key in
 *       this process, and is then requeued with {@link ImmediateRequeueAmqpException}: whatever the
 *       container's retry or requeue settings, it comes back and is never dead-lettered for that
 *       reason. Also when an application's advice on the listener bean, ordered before the guard,
 *       dropped the deferral and the call returned: the guard kept it for the delivery ({@link
 *       Delivery.KeptDeferral}). The application's advices between the two parts (a retry
 *       interceptor with a {@code MessageRecoverer}, Spring Boot's {@code
 *       spring.rabbitmq.listener.*.retry}) never see a deferral: the last part takes it from the
 *       listener, their call returns as if the delivery had succeeded (a retry neither retries nor
 *       recovers it), and the first part then requeues it. Nor do the application's error handlers,
 *       inside and outside the chain ({@link RabbitErrorHandlers});
 *   <li>a stored permanent failure that the listener does not acknowledge, and a message without a
 *       usable key ({@link InvalidIdempotencyKeyException}), are rejected with {@link
 *       AmqpRejectAndDontRequeueException}: the queue's dead-letter exchange takes them, if it has
 *       one;
 *   <li>every other failure goes on to the container unchanged.
 * </ul>
 */
final class RabbitDeliveryAdvice implements MethodInterceptor {

  private static final Logger log = LoggerFactory.getLogger(IdempotentListener.class);

  /**
   * The starter's advice last in every chain, right around the listener: takes a deferral from it
   * for the first part of the delivery on this thread, past the application's advices.
   */
  static final MethodInterceptor LAST = new DeferralCatcher();

  /** The deferral of the delivery the first part is around on this thread, once caught last. */
  private static final ThreadLocal<Caught> CAUGHT = new ThreadLocal<>();

  private final DeferralCounter deferrals;

  /**
   * The container whose chain this advice heads, or {@code null} for a factory's: its error handler
   * is wrapped when a deferral leaves the chain ({@link #bindIn}).
   */
  private final @Nullable AbstractMessageListenerContainer container;

  /**
   * Whether {@link #container}'s listener is guarded, found at its first delivery; {@code null}
   * before.
   */
  private volatile @Nullable Boolean guarded;

  /**
   * What a part after the first of a producer's batch meets in {@link #container} ({@link
   * RabbitProducerBatchParts#partsRuleOf}), found at the first such part; {@code null} before.
   */
  private volatile RabbitProducerBatchParts.@Nullable PartsRule partsRule;

  RabbitDeliveryAdvice(DeliveryBackOff backOff) {
    this(new DeferralCounter(backOff), null);
  }

  private RabbitDeliveryAdvice(
      DeferralCounter deferrals, @Nullable AbstractMessageListenerContainer container) {
    this.deferrals = deferrals;
    this.container = container;
  }

  /**
   * An advice chain with the starter's advice first and {@link #LAST} last, the application's
   * advices of {@code chain} between them in their order, or {@code null} if {@code chain} is
   * already so. The starter's first part is the one {@code chain} has, else this one.
   */
  Advice @Nullable [] firstIn(Advice @Nullable [] chain) {
    if (isComposed(chain)) {
      return null;
    }
    Advice first = this;
    List<Advice> composed = new ArrayList<>();
    if (chain != null) {
      for (Advice advice : chain) {
        if (advice instanceof RabbitDeliveryAdvice existing) {
          if (first == this) {
            first = existing;
          }
        } else if (!(advice instanceof DeferralCatcher)) {
          composed.add(advice);
        }
      }
    }
    composed.add(0, first);
    composed.add(LAST);
    return composed.toArray(new Advice[0]);
  }

  /**
   * Puts this advice first and {@link #LAST} last in a Spring AMQP container's advice chain unless
   * the chain is already so: after an application's {@code ContainerCustomizer} replaced the chain
   * the container got from its factory, or in the chain of a guarded listener's container bean,
   * whatever chain the application set; before the container is initialized (it reads its chain
   * then). The application's advices stay, between the two, in their order; the first part is bound
   * to the container ({@link #bindIn}).
   */
  void includeIn(Object container) {
    if (container instanceof AbstractMessageListenerContainer rabbit) {
      Advice[] withThis = firstIn(chainOf(rabbit));
      if (withThis != null) {
        rabbit.setAdviceChain(withThis);
      }
      bindIn(rabbit);
    }
  }

  /**
   * Binds the starter's advice first in a Spring AMQP container's chain, if it is there, to that
   * container (sharing its deferral counts), before the container is initialized (it reads its
   * chain then; later this changes nothing). A bound advice wraps the container's error handler
   * ({@link RabbitErrorHandlers#passDeferralsOf}) each time a deferral leaves the chain, right
   * before the container calls that handler with it: Spring AMQP has no hook on a container's start
   * or on {@code setErrorHandler}, and this is the one place every delivery of the container
   * passes, so a handler the application set after the start-up wrap (on a container started later)
   * or on a container the starter never saw created ({@code createListenerContainer()}) is wrapped
   * in time too.
   */
  static void bindIn(AbstractMessageListenerContainer container) {
    Advice[] chain = chainOf(container);
    if (chain != null
        && chain.length > 0
        && chain[0] instanceof RabbitDeliveryAdvice first
        && first.container != container) {
      Advice[] bound = chain.clone();
      bound[0] = new RabbitDeliveryAdvice(first.deferrals, container);
      container.setAdviceChain(bound);
    }
  }

  /**
   * Whether the advice chain a Spring AMQP container runs each delivery through has the starter's
   * advice first and, if it has other advices, {@link #LAST} last: the chain it was initialized
   * with (its {@code afterPropertiesSet()} builds a proxy of the chain, which a later {@code
   * setAdviceChain} does not change), or, before that, its chain.
   */
  static boolean isIn(AbstractMessageListenerContainer container) {
    return isComposed(runChainOf(container));
  }

  /**
   * The advices of the proxy an initialized container built from its chain (none if the chain was
   * empty: the proxy is then the container's own delegate), or the chain of one not initialized.
   * Read from the container's fields: Spring AMQP has no getter for either.
   */
  private static Advice @Nullable [] runChainOf(AbstractMessageListenerContainer container) {
    if (!Boolean.TRUE.equals(
        ListenerContainerHooks.current(container, "isInitialized", "initialized"))) {
      return chainOf(container);
    }
    if (!(ListenerContainerHooks.current(container, "getProxy", "proxy")
        instanceof Advised proxy)) {
      return new Advice[0];
    }
    Advisor[] advisors = proxy.getAdvisors();
    Advice[] advices = new Advice[advisors.length];
    for (int i = 0; i < advisors.length; i++) {
      advices[i] = advisors[i].getAdvice();
    }
    return advices;
  }

  /**
   * Whether {@code chain} starts with the starter's advice, ends with {@link #LAST} (or is the
   * starter's advice alone), and has no other part of the starter's between.
   */
  private static boolean isComposed(Advice @Nullable [] chain) {
    if (chain == null || chain.length == 0 || !(chain[0] instanceof RabbitDeliveryAdvice)) {
      return false;
    }
    if (chain.length == 1) {
      return true;
    }
    if (!(chain[chain.length - 1] instanceof DeferralCatcher)) {
      return false;
    }
    for (int i = 1; i < chain.length - 1; i++) {
      if (chain[i] instanceof RabbitDeliveryAdvice || chain[i] instanceof DeferralCatcher) {
        return false;
      }
    }
    return true;
  }

  private static Advice @Nullable [] chainOf(AbstractMessageListenerContainer container) {
    return (Advice[]) ListenerContainerHooks.current(container, "getAdviceChain", "adviceChain");
  }

  @Override
  public @Nullable Object invoke(MethodInvocation invocation) throws Throwable {
    Object[] arguments = invocation.getArguments();
    Object data = arguments.length > 1 ? arguments[1] : null;
    Caught caught = new Caught();
    PickedHandlers.Check check =
        container == null ? null : keptIn(caught, checkProducerBatchParts(container, data));
    PickedHandlers.Check previousCheck = PickedHandlers.bind(check);
    Delivery delivery = delivery(data);
    Delivery previous = Delivery.bind(delivery);
    Caught outer = CAUGHT.get();
    CAUGHT.set(caught);
    Throwable deferred;
    try {
      Object result = invocation.proceed();
      // deferred: the last part took it from the listener, past the application's advices; or a
      // part the picked handler refused, or a deferral the guard threw, which an advice on the
      // listener bean dropped
      Throwable kept =
          caught.failure != null
              ? caught.failure
              : caught.refused != null ? caught.refused : delivery.deferral().get();
      if (kept == null) {
        return result;
      }
      deferred = kept;
    } catch (Throwable failure) {
      if (caught.failure != null) {
        // deferred, then an application's advice failed on its way out: still not dead-lettered
        deferred = caught.failure;
      } else if (caught.refused != null) {
        deferred = caught.refused; // refused, whatever an advice on the listener bean made of it
      } else if (delivery.deferral().get() != null) {
        // deferred, whatever an advice on the listener bean made of it (without the last part)
        deferred = delivery.deferral().get();
      } else if (DeferredDeliveryException.deferralIn(failure) != null
          || RabbitProducerBatchParts.rejectionIn(failure) != null) {
        deferred = failure; // without the last part in the chain
      } else if (storedFailureIn(failure)
          || in(failure, InvalidIdempotencyKeyException.class)
          || in(failure, InvalidKeyException.class)) {
        throw new AmqpRejectAndDontRequeueException(
            "no usable key, or the key failed permanently before; rejected without requeue",
            failure);
      } else {
        throw failure;
      }
    } finally {
      if (outer == null) {
        CAUGHT.remove();
      } else {
        CAUGHT.set(outer);
      }
      Delivery.restore(previous);
      PickedHandlers.restore(previousCheck);
    }
    RabbitProducerBatchParts.RejectedPart rejected = RabbitProducerBatchParts.rejectionIn(deferred);
    if (rejected != null) {
      throw partRejected(
          "the guarded handler " + rejected.handler() + " of",
          container == null ? "?" : container.getListenerId(),
          rejected);
    }
    if (container != null) {
      RabbitErrorHandlers.passDeferralsOf(container); // the application may have replaced it
    }
    throw requeue(deferred);
  }

  /**
   * Keeps a guarded listener from taking a part of a producer's batch for the first message ({@link
   * RabbitProducerBatchParts}), before the listener runs: a batching strategy the application set
   * on the container after the start is wrapped again and the delivery requeued (it may have been
   * split unmarked); a part after the first reaching a record listener whose key may read anything
   * but the payload is rejected without requeue, not sent (its headers, from which Spring resolves
   * {@code @Header} parameters and the rest, are the first message's). A part after the first that
   * an unwrapped strategy split (read by the container before another consumer's delivery had it
   * wrapped again) is requeued too ({@link RabbitProducerBatchParts#splitUnmarked}).
   *
   * <p>A class-level listener's handler is picked by Spring after this advice, so a part after the
   * first to one is decided by the guard of the handler picked: the check returned, for {@link
   * PickedHandlers}, rejects it there if that handler may read its key from the headers ({@link
   * RabbitProducerBatchParts.RejectedPart}, which {@link DeferralCatcher} carries past the
   * application's advices, as a deferral); an unguarded handler, or one keyed by its payload, takes
   * it.
   *
   * @return the check for the handler Spring picks, or {@code null} for none
   */
  private PickedHandlers.@Nullable Check checkProducerBatchParts(
      AbstractMessageListenerContainer rabbit, @Nullable Object data) {
    Boolean known = guarded;
    if (known == null) {
      known = UnsupportedRabbitContainers.guardedMethod(rabbit) != null;
      guarded = known;
    }
    if (!known) {
      return null;
    }
    if (RabbitProducerBatchParts.splitUnmarked(data)) {
      RabbitProducerBatchParts.markedAgain(rabbit);
      log.warn(
          "A part after the first of a producer's batch (BatchingRabbitTemplate) reached RabbitMQ"
              + " listener container '{}' unmarked: a batching strategy the application set after"
              + " the start split it (another consumer had it wrapped again meanwhile); the"
              + " delivery is requeued",
          rabbit.getListenerId());
      throw new ImmediateRequeueAmqpException(
          "a producer batch's part split by a replaced batching strategy; requeued");
    }
    if (RabbitProducerBatchParts.markedAgain(rabbit)) {
      log.warn(
          "The batching strategy of RabbitMQ listener container '{}' was replaced after the start;"
              + " the starter wrapped it again (it marks the parts of a producer's batch) and"
              + " requeued the delivery",
          rabbit.getListenerId());
      throw new ImmediateRequeueAmqpException(
          "the container's batching strategy was replaced; wrapped again, requeued");
    }
    if (!(data instanceof Message message) || !RabbitProducerBatchParts.isMarked(message)) {
      return null;
    }
    RabbitProducerBatchParts.PartsRule rule = partsRule(rabbit);
    if (rule.rejected()) {
      throw partRejected("the guarded listener of", rabbit.getListenerId(), null);
    }
    return rule.refusingHandlers().isEmpty()
        ? null
        : new PickedHandlers.Check(
            rule.handlers(), RabbitProducerBatchParts.refuseIn(rule.refusingHandlers()));
  }

  /**
   * A part after the first of a producer's batch that reached a guarded listener, or the guarded
   * handler Spring picked, which may read its key from the message's headers, which such a part
   * shares with the batch's first message: logged (one WARN) and rejected without requeue, never
   * sent.
   *
   * @param reached what the part reached, before the container's name
   * @param listenerId the container's
   * @param cause the picked handler's refusal, or null for the container's listener
   * @return the rejection to throw
   */
  private static AmqpRejectAndDontRequeueException partRejected(
      String reached, String listenerId, @Nullable Throwable cause) {
    log.warn(
        "A part after the first of a producer's batch (BatchingRabbitTemplate) reached {} RabbitMQ"
            + " listener container '{}', which may read its key from the message's headers (a"
            + " header, @Header or Message parameter, or one the application's argument resolver"
            + " resolves), which such a part shares with the batch's first message: the batch is"
            + " rejected without requeue (dead-lettered if its queue has a dead-letter exchange),"
            + " this part not sent. Key it by its payload.",
        reached,
        listenerId);
    return new AmqpRejectAndDontRequeueException(
        "a producer batch's part after the first, to "
            + (cause == null ? "a listener" : "a handler")
            + " keyed from its headers: rejected without requeue",
        cause);
  }

  /** {@link RabbitProducerBatchParts#partsRuleOf}, worked out (the keys parsed) once. */
  private RabbitProducerBatchParts.PartsRule partsRule(AbstractMessageListenerContainer rabbit) {
    RabbitProducerBatchParts.PartsRule known = partsRule;
    if (known == null) {
      known = RabbitProducerBatchParts.partsRuleOf(rabbit);
      partsRule = known;
    }
    return known;
  }

  /**
   * Waits the messaging backoff of a deferral on the consumer's thread, and returns the exception
   * that requeues the delivery.
   */
  private ImmediateRequeueAmqpException requeue(Throwable failure) {
    Throwable deferral = DeferredDeliveryException.deferralIn(failure);
    Duration pause =
        deferrals.next(DeferredDeliveryException.backOffId(deferral != null ? deferral : failure));
    log.debug("Requeueing a deferred delivery after {} ms", pause.toMillis());
    try {
      Thread.sleep(pause.toMillis());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt(); // stopping: requeue at once
    }
    return new ImmediateRequeueAmqpException(
        "deferred, requeued after " + pause.toMillis() + " ms", failure);
  }

  /**
   * The check for the handler Spring picks, keeping a refusal it throws in {@code caught}: the
   * refusal is thrown inside the listener bean's proxy, where an application's advice around the
   * handler (ordered before the guard) may drop it and return; the part is rejected all the same,
   * never acknowledged unsent.
   */
  private static PickedHandlers.@Nullable Check keptIn(
      Caught caught, PickedHandlers.@Nullable Check check) {
    if (check == null) {
      return null;
    }
    return new PickedHandlers.Check(
        check.handlers(),
        picked -> {
          try {
            check.onPicked().accept(picked);
          } catch (RabbitProducerBatchParts.RejectedPart refused) {
            caught.refused = refused;
            throw refused;
          }
        });
  }

  /**
   * The deferral {@link #LAST} caught for the first part, and the refusal of the handler picked for
   * a part of a producer's batch, on one thread.
   */
  private static final class Caught {
    @Nullable Throwable failure;
    RabbitProducerBatchParts.@Nullable RejectedPart refused;
  }

  /**
   * The starter's advice last in the chain, right around the listener: a deferral the listener
   * throws is kept for the first part ({@link RabbitDeliveryAdvice}) around the same delivery, and
   * the call returns as if it had succeeded, so that no advice between (a retry and its recoverer)
   * retries or dead-letters it; the first part then requeues it. Without the first part around the
   * call, or on any other failure, the failure goes on unchanged.
   */
  private static final class DeferralCatcher implements MethodInterceptor {
    @Override
    public @Nullable Object invoke(MethodInvocation invocation) throws Throwable {
      try {
        return invocation.proceed();
      } catch (Throwable failure) {
        Caught caught = CAUGHT.get();
        if (caught == null
            || (DeferredDeliveryException.deferralIn(failure) == null
                && RabbitProducerBatchParts.rejectionIn(failure) == null)) {
          throw failure;
        }
        caught.failure = failure;
        return null;
      }
    }
  }

  private static Delivery delivery(@Nullable Object data) {
    if (data instanceof Message message && isProducerBatch(message)) {
      // a producer's batch (BatchingRabbitTemplate) reaches this advice whole only on its way to a
      // batch listener, which gets it split into a list after it (a record listener's container
      // splits it first, and each part after the first comes here marked by
      // RabbitProducerBatchParts): a batch, whose parts carry no headers of their own (the
      // producer's batch keeps the first message's only)
      return new Delivery(List.of(), true, Delivery.WHOLE_BATCH, true);
    }
    if (data instanceof Message message) {
      return new Delivery(
          List.of(RabbitProducerBatchParts.headersOf(message)), false, Delivery.WHOLE_BATCH, true);
    }
    List<Map<String, Object>> headers = new ArrayList<>();
    if (data instanceof List<?> messages) {
      for (Object each : messages) {
        headers.add(
            each instanceof Message message
                ? RabbitProducerBatchParts.headersOf(message)
                : Map.of());
      }
    }
    return new Delivery(headers, true, Delivery.WHOLE_BATCH, true);
  }

  /** Whether {@code message} is a producer's batch that the container will split. */
  private static boolean isProducerBatch(Message message) {
    return message
        .getMessageProperties()
        .getHeaders()
        .containsKey(MessageProperties.SPRING_BATCH_FORMAT);
  }

  private static boolean storedFailureIn(Throwable failure) {
    return in(failure, IdempotencyStoredFailureException.class);
  }

  private static boolean in(Throwable failure, Class<? extends Throwable> type) {
    for (Throwable t = failure; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (type.isInstance(t)) {
        return true;
      }
    }
    return false;
  }
}
