package dev.idempotency.spring.messaging;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.IdempotencyStoredFailureException;
import dev.idempotency.KeyStoreException;
import dev.idempotency.Outcome;
import dev.idempotency.ResultCodec;
import dev.idempotency.SendContext;
import dev.idempotency.SendFailedException;
import dev.idempotency.spring.JsonCodecs;
import java.lang.reflect.UndeclaredThrowableException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;
import org.aopalliance.intercept.MethodInterceptor;
import org.aopalliance.intercept.MethodInvocation;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.aop.support.AopUtils;

/**
 * Runs an {@link IdempotentListener} delivery through the guard. A deferral it throws is also kept
 * for the delivery ({@link Delivery.KeptDeferral}), per call (a record call's operation and key, a
 * batch call's operation and the keys of its elements, in order), for the broker's hook, in case an
 * application's advice on the listener bean, or an unguarded listener calling the guarded method,
 * drops it; it is forgotten only when the same call is made again and returns or fails otherwise.
 *
 * <ol>
 *   <li>A record listener: one {@code executeForOutcome} under the listener's operation; a replay
 *       returns without running it (the container acknowledges); a key in flight elsewhere, or a
 *       store that cannot be asked, becomes a {@link DeferredDeliveryException} (not acknowledged,
 *       back later); a stored failure is acknowledged or rethrown as the listener chose; the
 *       listener's own failure releases the key and reaches the container unchanged.
 *   <li>A batch listener: {@link ListenerBatches}.
 *   <li>In a listener container's transaction ({@link ContainerTransactions}) the outcome of a
 *       record listener that ran waits for its end ({@link OutcomesAfterCommit}, shared with {@code
 *       Idempotent} listener methods): recorded after the commit, released if it did not commit.
 * </ol>
 */
final class IdempotentListenerInterceptor implements MethodInterceptor {

  private static final Logger log = LoggerFactory.getLogger(IdempotentListener.class);

  private final ListenerMethods methods;
  private final Supplier<IdempotencyGuard> guard;
  private final Supplier<JsonCodecs> json;
  private final Map<ListenerMethod, ResultCodec<Object>> codecs = new ConcurrentHashMap<>();
  private final ListenerBatches batches;

  IdempotentListenerInterceptor(
      ListenerMethods methods, Supplier<IdempotencyGuard> guard, Supplier<JsonCodecs> json) {
    this.methods = methods;
    this.guard = guard;
    this.json = json;
    this.batches = new ListenerBatches(guard);
  }

  @Override
  public @Nullable Object invoke(MethodInvocation invocation) throws Throwable {
    Object target = invocation.getThis();
    Class<?> targetClass =
        target != null
            ? AopUtils.getTargetClass(target)
            : invocation.getMethod().getDeclaringClass();
    ListenerMethod method = methods.find(invocation.getMethod(), targetClass);
    if (method == null) {
      return invocation.proceed();
    }
    PickedHandlers.check(invocation.getMethod(), targetClass);
    Delivery delivery = Delivery.current();
    if (delivery == null) {
      return guarded(invocation, method, null, null);
    }
    // the call's keys, once read (a record's, or every element's of a batch): a deferral is kept
    // per call, so that a call for other keys of the same delivery that returns (another
    // recipient, another chunk of a batch) does not erase it
    List<String> keys = new ArrayList<>();
    try {
      Object result = guarded(invocation, method, delivery, keys);
      settle(delivery, method, keys, null);
      return result;
    } catch (Throwable failure) {
      // a deferral is kept for the broker's hook, past an application's advice that may drop it
      settle(delivery, method, keys, failure);
      throw failure;
    }
  }

  /**
   * Which call of a delivery a deferral is kept for: the listener's operation and the keys it was
   * given (a record call's one key, a batch call's elements' keys in order). A later call of the
   * same operation and keys is a retry of it; one for other keys (another recipient, another chunk
   * of the delivery's batch) is not.
   */
  private record ListenerCall(String operation, List<String> keys) {}

  /**
   * The call ended ({@link Delivery.KeptDeferral#settle}): its deferral is kept, or the deferral
   * kept for it forgotten once it returned or failed otherwise. A call whose keys could not all be
   * read (none of a record's, or not every element's of a batch) is no retry of a deferred call and
   * forgets none; its own deferral is kept all the same, under a call no other is.
   */
  private static void settle(
      Delivery delivery, ListenerMethod method, List<String> keys, @Nullable Throwable failure) {
    if (!keys.isEmpty()) {
      delivery.deferral().settle(new ListenerCall(method.name, List.copyOf(keys)), failure);
    } else if (failure != null && DeferredDeliveryException.deferralIn(failure) != null) {
      delivery.deferral().settle(new Object(), failure);
    }
  }

  /**
   * Whether the call is a batch listener's: a List parameter makes one only where the container
   * hands out a batch (a record listener may take a List payload, a JSON array, and JMS has no
   * batch listeners).
   */
  private static boolean isBatch(ListenerMethod method, @Nullable Delivery delivery) {
    return method.batchIndex >= 0 && (delivery == null || delivery.batch());
  }

  private @Nullable Object guarded(
      MethodInvocation invocation,
      ListenerMethod method,
      @Nullable Delivery delivery,
      @Nullable List<String> keys)
      throws Throwable {
    if (isBatch(method, delivery)) {
      return batches.run(invocation, method, delivery, keys);
    }
    return record(invocation, method, delivery, keys);
  }

  @SuppressWarnings("unchecked")
  private ResultCodec<Object> codec(ListenerMethod method) {
    return codecs.computeIfAbsent(
        method,
        m ->
            m.resultType == void.class || m.resultType == Void.class
                ? (ResultCodec<Object>) (ResultCodec<?>) ResultCodec.string()
                : json.get().codecFor(m.resultType));
  }

  /**
   * A record listener's call through the guard; its key, once read, is added to {@code keysOut} (if
   * given) for the deferral kept per call.
   */
  private @Nullable Object record(
      MethodInvocation invocation,
      ListenerMethod method,
      @Nullable Delivery delivery,
      @Nullable List<String> keysOut)
      throws Throwable {
    Object[] arguments = invocation.getArguments();
    String key =
        method.recordKey(invocation.getThis(), arguments, recordHeaders(delivery, arguments));
    if (keysOut != null) {
      keysOut.add(key);
    }
    IdempotencyRequest request = IdempotencyRequest.of(key, method.ttl).withOperation(method.name);
    Throwable[] thrown = new Throwable[1];
    // a nack (Kafka, manual acknowledgement) is a send that did not happen: the key is released
    HeldNack nack = Messages.holdNack(arguments);
    try {
      Outcome<Object> outcome =
          OutcomesAfterCommit.executeForOutcome(
              guard.get(),
              request,
              codec(method),
              method.name,
              context -> run(invocation, context, thrown, nack));
      if (outcome.replayed()) {
        Messages.acknowledgeSkipped(arguments);
        log.debug(
            "Listener {} acknowledged a delivery of key {} without running: sent before (attempt {})",
            method.name,
            IdempotencyKey.digest(key),
            outcome.attempt());
      }
      return outcome.value();
    } catch (IdempotencyInProgressException e) {
      if (thrown[0] != null) {
        throw e; // the listener's own call (an @Idempotent method) threw it
      }
      throw deferred(method, e.keyDigest(), "the key is being sent by another consumer", e);
    } catch (KeyStoreException e) {
      if (thrown[0] != null) {
        throw e;
      }
      throw deferred(method, "store", "the store could not be asked; nothing ran", e);
    } catch (IdempotencyStoredFailureException e) {
      if (thrown[0] == null && method.acknowledgeStoredFailure) {
        log.info(
            "Listener {} acknowledged a delivery of key {} without running: its first delivery"
                + " failed permanently ({})",
            method.name,
            e.keyDigest(),
            e.failureType());
        Messages.acknowledgeSkipped(arguments);
        return null;
      }
      throw e;
    } catch (HeldNack.Nacked e) {
      if (nack == null || thrown[0] != e) {
        throw e;
      }
      log.debug(
          "Listener {} nacked a delivery of key {}; its key is released",
          method.name,
          IdempotencyKey.digest(key));
      nack.passNack();
      return null;
    } catch (SendFailedException e) {
      throw ownFailure(e, thrown);
    } finally {
      if (nack != null) {
        nack.restore();
      }
    }
  }

  private static Map<String, Object> recordHeaders(
      @Nullable Delivery delivery, Object[] arguments) {
    if (delivery != null && !delivery.batch()) {
      return delivery.headersOf(0);
    }
    for (Object argument : arguments) {
      Map<String, Object> headers = Messages.headersOf(argument);
      if (headers != null) {
        return headers;
      }
    }
    return Map.of();
  }

  private static Object run(
      MethodInvocation invocation, SendContext context, Throwable[] thrown, @Nullable HeldNack nack)
      throws Exception {
    SendContext previous = IdempotentDelivery.bindRecord(context);
    try {
      Object result = invocation.proceed();
      if (nack != null && nack.nacked()) {
        throw new HeldNack.Nacked();
      }
      return result;
    } catch (Exception | Error e) {
      thrown[0] = e;
      throw e;
    } catch (Throwable t) {
      thrown[0] = t;
      throw new UndeclaredThrowableException(t);
    } finally {
      IdempotentDelivery.restoreRecord(previous);
    }
  }

  static DeferredDeliveryException deferred(
      ListenerMethod method, String keyDigest, String reason, Throwable cause) {
    log.info(
        "Listener {} deferred a delivery of key {}: {}; it is not acknowledged and comes back later",
        method.name,
        keyDigest,
        reason);
    return new DeferredDeliveryException(method.name, keyDigest, reason, cause);
  }

  /**
   * The deferral of a filtered Kafka batch whose payloads cannot be matched to their records (a
   * converter replaced them, or several records share one value object), while the key is read from
   * headers: no message is read with another's key (lent, it would record one message as sent and
   * replay the other unsent), none is dead-lettered for it, and the batch comes back until the
   * listener takes records or messages. Logged at WARN: the listener needs a change.
   */
  static DeferredDeliveryException unmatchedPayloads(ListenerMethod method) {
    String reason =
        "its batch was filtered (RecordFilterStrategy) and its payloads cannot be matched to their"
            + " records (converted, or one value object shared by several records, as Kafka's"
            + " IntegerDeserializer gives small numbers), so their key headers cannot be read;"
            + " nothing ran and the batch comes back. Take the batch as List<ConsumerRecord<K, V>>"
            + " or List<Message<?>>, or key the listener by the payload";
    log.warn("Listener {} cannot run a delivery: {}", method.name, reason);
    return new DeferredDeliveryException(
        method.name, "unmatched", reason, new IllegalStateException(reason));
  }

  /** The listener's own checked exception, not the guard's wrapper of it. */
  private static Throwable ownFailure(SendFailedException error, Throwable[] thrown) {
    Throwable cause = error.getCause();
    if (cause != null && (cause == thrown[0] || thrown[0] == null)) {
      return cause;
    }
    return error;
  }
}
