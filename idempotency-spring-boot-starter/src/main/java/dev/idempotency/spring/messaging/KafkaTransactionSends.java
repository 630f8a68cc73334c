package dev.idempotency.spring.messaging;

import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.producer.Producer;
import org.jspecify.annotations.Nullable;
import org.springframework.kafka.core.ProducerFactory;
import org.springframework.kafka.core.ProducerPostProcessor;

/**
 * Tells whether a listener produced records in its container's Kafka transaction: records the
 * transaction's abort discards, unlike a provider call's send. {@link ContainerTransactionManager}
 * asks it when a Kafka batch that stopped partway has its transaction not commit after all: the
 * records before the stop are recorded then (their redelivery is a replay), except those for which
 * the listener produced in that transaction ({@link TransactionProduces}), whose abort undid those
 * sends; they are released, and sent again, once, at their redelivery.
 *
 * <p>The hook is Spring Kafka's own for wrapping the producers a factory creates, a {@link
 * ProducerPostProcessor} (as tracing libraries use it), added to each transaction-capable {@code
 * ProducerFactory} bean and to the producer factory of each listener container's Kafka transaction
 * manager; a factory that is not transaction capable cannot begin a container's transaction, and
 * its producers are left as they are. Each producer it wraps counts its {@code send} calls,
 * whatever sends through it (a {@code KafkaTemplate}, the producer itself); the rest is the
 * producer's own. The producer that begins the container's transaction, inside the transaction
 * manager's {@code getTransaction}, is noted for that transaction ({@link #capture()}): a send
 * through another producer (a non-transactional one, a template's {@code executeInTransaction},
 * which commits on its own) is not counted for it.
 *
 * <p>Where the producer is not known (a {@code ProducerFactory} that does not take post-processors,
 * or a producer it created before the starter added its own), nothing tells: the records before a
 * stop are recorded, as for a provider call. Stateless but for the thread-bound capture.
 */
final class KafkaTransactionSends implements ProducerPostProcessor<Object, Object> {

  /** The one post-processor: a factory that has it is not given it again. */
  static final KafkaTransactionSends INSTANCE = new KafkaTransactionSends();

  /** Where the producer that begins a transaction on this thread is noted, while it begins. */
  private static final ThreadLocal<Capture> BEGINNING = new ThreadLocal<>();

  private KafkaTransactionSends() {}

  /** The sends through one producer. */
  static final class Sends {
    private final AtomicLong count = new AtomicLong();

    /** The records produced through this producer so far. */
    long count() {
      return count.get();
    }
  }

  /** The producer that began a transaction while this capture was open, if a wrapped one did. */
  static final class Capture {
    private final @Nullable Capture previous;
    private @Nullable Sends begun;

    private Capture(@Nullable Capture previous) {
      this.previous = previous;
    }

    /** Closes the capture; returns the sends of the producer that began, or null if unknown. */
    @Nullable Sends end() {
      if (previous == null) {
        BEGINNING.remove();
      } else {
        BEGINNING.set(previous);
      }
      return begun;
    }
  }

  /**
   * Opens a capture of the producer that begins a transaction on this thread, until {@link
   * Capture#end()}: around a Kafka transaction manager's {@code getTransaction}.
   */
  static Capture capture() {
    Capture capture = new Capture(BEGINNING.get());
    BEGINNING.set(capture);
    return capture;
  }

  /**
   * Adds this post-processor to {@code factory} unless it has it, if it is transaction capable:
   * producers it creates from then on are counted. A factory that is not (no producer of it begins
   * a container's transaction), or that does not take post-processors, is left alone.
   */
  @SuppressWarnings({"unchecked", "rawtypes"})
  static void observe(ProducerFactory<?, ?> factory) {
    if (!factory.transactionCapable()) {
      return; // its sends are never in a container's transaction: not worth a proxy on each send
    }
    try {
      if (!factory.getPostProcessors().contains(INSTANCE)) {
        ((ProducerFactory) factory).addPostProcessor(INSTANCE);
      }
    } catch (UnsupportedOperationException notSupported) {
      // its producers are not known: a stop's rollback records, as for a provider call
    }
  }

  @Override
  public Producer<Object, Object> apply(Producer<Object, Object> producer) {
    if (Proxy.isProxyClass(producer.getClass())
        && Proxy.getInvocationHandler(producer) instanceof Counting) {
      return producer;
    }
    @SuppressWarnings("unchecked")
    Producer<Object, Object> counted =
        (Producer<Object, Object>)
            Proxy.newProxyInstance(
                Producer.class.getClassLoader(),
                new Class<?>[] {Producer.class},
                new Counting(producer));
    return counted;
  }

  /**
   * A producer's calls, passed on as they are: a {@code send} counted, a {@code beginTransaction}
   * that succeeded noted by the open capture. A proxy keeps this working with the {@code Producer}
   * interface of each Kafka client line (its methods differ between 3.x and 4.x).
   */
  private static final class Counting implements InvocationHandler {
    private final Producer<?, ?> target;
    private final Sends sends = new Sends();

    Counting(Producer<?, ?> target) {
      this.target = target;
    }

    @Override
    public @Nullable Object invoke(Object proxy, Method method, @Nullable Object[] args)
        throws Throwable {
      String name = method.getName();
      if (method.getDeclaringClass() == Object.class && !name.equals("toString")) {
        // equals and hashCode: the proxy's identity, as a producer's own
        return name.equals("equals")
            ? args != null && proxy == args[0]
            : (Object) System.identityHashCode(proxy);
      }
      if (name.equals("send")) {
        // counted before it is handed on: a send that then fails may have reached the transaction
        sends.count.incrementAndGet();
      }
      Object result;
      try {
        result = method.invoke(target, args);
      } catch (InvocationTargetException e) {
        throw e.getCause() != null ? e.getCause() : e;
      }
      if (name.equals("beginTransaction")) {
        Capture capture = BEGINNING.get();
        if (capture != null) {
          capture.begun = sends;
        }
      }
      return result;
    }
  }
}
