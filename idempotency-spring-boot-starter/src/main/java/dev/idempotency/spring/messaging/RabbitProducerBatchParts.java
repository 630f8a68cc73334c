package dev.idempotency.spring.messaging;

import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.security.SecureRandom;
import java.util.Collection;
import java.util.Date;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;
import org.springframework.amqp.AmqpRejectAndDontRequeueException;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.core.MessageProperties;
import org.springframework.amqp.rabbit.batch.BatchingStrategy;
import org.springframework.amqp.rabbit.batch.MessageBatch;
import org.springframework.amqp.rabbit.listener.AbstractMessageListenerContainer;
import org.springframework.beans.BeanUtils;
import org.springframework.util.ReflectionUtils;

/**
 * Keeps the starter from reading a header key of one message of a producer's batch ({@code
 * BatchingRabbitTemplate}) as another's. Spring AMQP's {@code SimpleBatchingStrategy} keeps the
 * first message's headers only, and its {@code deBatch} hands every part the batch message's
 * properties (shared, or copied for the last part): each part would carry the first message's key,
 * and be acknowledged as its replay, unsent. The starter cannot know at startup whether a producer
 * batches, so each Spring AMQP container's {@link BatchingStrategy} is wrapped ({@link #markIn}):
 * every part after the first gets properties of its own with a {@link #PART} header, bound to the
 * delivery it was split from ({@link #PART_OF}), and the starter reads no header of such a part
 * ({@link #headersOf}). A marker that is not bound to the message's own delivery (a publisher that
 * sent the headers of a part it consumed, or any header it chose) is no marker: that message is a
 * message of its own, keyed by its own headers ({@link #isMarked}). A header-keyed listener then
 * finds no key for it and rejects it without requeue, nothing sent ({@link
 * MissingIdempotencyKeyException}); a key read from the payload is each part's own and works. The
 * first part keeps the batch message's headers, which are its own.
 *
 * <p>Spring resolves a listener method's {@code @Header} parameters, a {@code Message}, the
 * parameters the application's own argument resolvers support, and the rest from the part's
 * headers, the first message's: a guarded record listener whose key may read anything but the
 * payload ({@link #partsRuleOf}) has each marked part rejected before it runs ({@link
 * RabbitDeliveryAdvice}); a class-level listener's handler, which Spring picks after that advice,
 * by the guard of the handler picked ({@link PickedHandlers}), so that its unguarded and
 * payload-keyed handlers take it. Only the containers of guarded listeners are marked; a strategy
 * the application sets on one after the start is wrapped again at its next delivery ({@link
 * #markedAgain}), which is requeued.
 */
final class RabbitProducerBatchParts {

  /**
   * The header the starter puts on each part of a producer's batch after the first: its position in
   * the batch (1 for the second part).
   */
  static final String PART = "idempotency_producerBatchPart";

  /**
   * The header the starter puts beside {@link #PART}: a random value of this JVM's, and the queue,
   * consumer tag and delivery tag of the producer's batch the part was split from, which bind the
   * marker to that delivery. A message published with both headers (copied from a part) arrives as
   * another delivery.
   */
  static final String PART_OF = "idempotency_producerBatchDelivery";

  /**
   * A random value of this JVM's, first in every {@link #PART_OF}: consumer tags may be the
   * application's own (a fixed {@code ConsumerTagStrategy}) and delivery tags restart at 1 on every
   * channel, so the tags alone repeat, and a message published with a part's headers could name its
   * own delivery by chance; no other process can name this one.
   */
  private static final String THIS_JVM = thisJvm();

  private RabbitProducerBatchParts() {}

  /**
   * Wraps the batching strategy of a Spring AMQP listener container, unless already wrapped, so
   * that the parts after the first of each batch it splits are marked ({@link #PART}). Anything
   * else is left as it is.
   */
  static void markIn(Object container) {
    if (container instanceof AbstractMessageListenerContainer rabbit
        && UnsupportedRabbitContainers.guardedMethod(rabbit) != null) {
      markedAgain(rabbit);
    }
  }

  /** Spring AMQP's field of a container's strategy (its getter is protected), read at delivery. */
  private static final Field STRATEGY =
      fieldOf(AbstractMessageListenerContainer.class, "batchingStrategy");

  private static Field fieldOf(Class<?> type, String name) {
    Field field = ReflectionUtils.findField(type, name);
    if (field == null) {
      throw new IllegalStateException(
          "cannot read the "
              + name
              + " of "
              + type.getName()
              + "; please report this with your Spring AMQP version");
    }
    ReflectionUtils.makeAccessible(field);
    return field;
  }

  /**
   * Wraps the container's batching strategy if it is not wrapped (a guarded listener's container,
   * whose strategy the application replaced), and says whether it did.
   */
  static boolean markedAgain(AbstractMessageListenerContainer rabbit) {
    Object current = ReflectionUtils.getField(STRATEGY, rabbit);
    if (current instanceof BatchingStrategy strategy && !(strategy instanceof Marking)) {
      rabbit.setBatchingStrategy(new Marking(strategy));
      return true;
    }
    return false;
  }

  /**
   * The consumer and delivery tags of the last message a guarded container's delivery handed to the
   * starter's advice on this thread: the parts of one producer's batch share them, and are handed
   * out one after the other on the thread that split the batch.
   */
  private static final ThreadLocal<@Nullable String> LAST_DELIVERY = new ThreadLocal<>();

  /**
   * Whether {@code data}, a guarded container's delivery, is or holds a part after the first of a
   * producer's batch that no marking strategy split: unmarked, with the consumer and delivery tags
   * of the message before it (of the same delivery on this thread, or earlier in the list). A
   * strategy the application set after the start may be read by one consumer right before another's
   * delivery has it wrapped again ({@link #markedAgain}): that consumer's parts are then unmarked,
   * and carry the first message's headers.
   */
  static boolean splitUnmarked(@Nullable Object data) {
    if (data instanceof Message message) {
      String delivery = deliveryOf(message);
      String last = LAST_DELIVERY.get();
      LAST_DELIVERY.set(delivery);
      return delivery != null && delivery.equals(last) && !isMarked(message);
    }
    if (data instanceof List<?> messages) {
      Set<String> seen = new HashSet<>();
      for (Object each : messages) {
        if (each instanceof Message message) {
          String delivery = deliveryOf(message);
          if (delivery != null && !seen.add(delivery) && !isMarked(message)) {
            return true;
          }
        }
      }
    }
    return false;
  }

  /** The message's consumer and delivery tags, or {@code null} if it has neither. */
  private static @Nullable String deliveryOf(Message message) {
    MessageProperties properties = message.getMessageProperties();
    String consumer = properties.getConsumerTag();
    long tag = properties.getDeliveryTag();
    return consumer == null || tag == 0 ? null : consumer + "#" + tag;
  }

  /**
   * Whether {@code message} is a part after the first of a producer's batch, marked when the
   * starter's strategy split its delivery: both headers, {@link #PART_OF} naming the message's own
   * delivery. The headers alone are no marker: a publisher may send them (copied from a part it
   * consumed), and such a message is delivered on its own, with its own tags.
   */
  static boolean isMarked(Message message) {
    Map<String, Object> headers = message.getMessageProperties().getHeaders();
    return headers.containsKey(PART) && boundTo(message).equals(headers.get(PART_OF));
  }

  /**
   * The value of {@link #PART_OF} for a part of {@code message}'s delivery: this JVM's random
   * value, the queue it was consumed from, its consumer and delivery tags; or an empty string for a
   * message that has no tags (not from a broker's delivery). The queue tells apart the containers
   * of this JVM that share a fixed consumer tag: a part's headers copied onto a message published
   * to another queue never name that message's delivery.
   */
  private static String boundTo(Message message) {
    String delivery = deliveryOf(message);
    if (delivery == null) {
      return "";
    }
    String queue = message.getMessageProperties().getConsumerQueue();
    return THIS_JVM + "#" + (queue == null ? "" : queue) + "#" + delivery;
  }

  private static String thisJvm() {
    byte[] random = new byte[16];
    new SecureRandom().nextBytes(random);
    return HexFormat.of().formatHex(random);
  }

  /**
   * What a part after the first of a producer's batch meets in a guarded container ({@link
   * RabbitDeliveryAdvice}), worked out once per container.
   *
   * @param rejected whether it is rejected before Spring picks a listener method: the container
   *     calls one method (or one of a {@code MessageListenerAdapter}'s), and some guarded one may
   *     read its key from anything but the payload
   * @param refusingHandlers the guarded {@code @RabbitHandler} methods of a class-level listener
   *     that may read their key from anything but the payload: each refuses the part once Spring
   *     picked it ({@link #refuseIn}); the container's other handlers take it
   * @param handlers the guarded {@code @RabbitHandler} methods of a class-level listener, those the
   *     check runs for ({@link PickedHandlers})
   */
  record PartsRule(boolean rejected, Set<Method> refusingHandlers, Set<Method> handlers) {}

  /**
   * The rule of a guarded container's parts. A key counts as read from the payload only where it
   * provably is ({@link PayloadKeys}): for an annotated listener method, by the argument resolvers
   * Spring resolves its arguments with (the container's {@code MessageHandlerMethodFactory}'s, the
   * application's own ones included); if they cannot be read, it counts as read from the headers
   * (the part rejected, never lost).
   *
   * <p>A class-level {@code @RabbitListener} is decided per handler: Spring AMQP picks its
   * {@code @RabbitHandler} by the type of the converted payload, inside the listener adapter, after
   * the container's advices ran. Converting the part here to find that handler would run the
   * application's message converter twice, so the guard of the handler Spring picked refuses the
   * part instead, right before it runs ({@link PickedHandlers}); an unguarded handler, or one keyed
   * by its payload, takes it.
   */
  static PartsRule partsRuleOf(AbstractMessageListenerContainer rabbit) {
    List<Method> guarded = UnsupportedRabbitContainers.guardedMethods(rabbit);
    PayloadKeys.Reading reading = PayloadKeys.read(rabbit, guarded);
    if (reading.classLevel()) {
      return new PartsRule(false, reading.notKeyedByPayload(), Set.copyOf(guarded));
    }
    return new PartsRule(!reading.notKeyedByPayload().isEmpty(), Set.of(), Set.of());
  }

  /**
   * The check that the guard of the handler Spring picked for a part after the first of a
   * producer's batch runs right before that handler ({@link PickedHandlers}): a handler in {@code
   * refusing} rejects the part ({@link RejectedPart}); any other takes it.
   */
  static Consumer<Method> refuseIn(Set<Method> refusing) {
    return picked -> {
      if (refusing.contains(picked)) {
        throw new RejectedPart(picked);
      }
    };
  }

  /** The rejection of a part in {@code failure}'s cause chain, or {@code null}. */
  static @Nullable RejectedPart rejectionIn(@Nullable Throwable failure) {
    for (Throwable t = failure; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof RejectedPart rejected) {
        return rejected;
      }
    }
    return null;
  }

  /**
   * A part after the first of a producer's batch, refused by the guarded handler that Spring picked
   * for it, before it ran: its key may read the headers, the first message's. A reject without
   * requeue; the starter's advices carry it past the application's ({@link RabbitDeliveryAdvice},
   * {@link RabbitErrorHandlers}).
   */
  static final class RejectedPart extends AmqpRejectAndDontRequeueException {

    private static final long serialVersionUID = 1L;

    /** The handler, as {@code Type.method}: never a key. */
    private final String handler;

    RejectedPart(Method picked) {
      super(
          "a producer batch's part after the first, to a guarded handler keyed from its headers"
              + " ("
              + picked.getDeclaringClass().getSimpleName()
              + "."
              + picked.getName()
              + "): rejected without requeue");
      this.handler = picked.getDeclaringClass().getName() + "." + picked.getName();
    }

    /** The handler that refused the part, as {@code Type.method}. */
    String handler() {
      return handler;
    }
  }

  /**
   * The headers the starter may read a key from: none for a part after the first of a producer's
   * batch ({@link #isMarked}: it carries the first message's), else the message's own.
   */
  static Map<String, Object> headersOf(Message message) {
    return isMarked(message) ? Map.of() : message.getMessageProperties().getHeaders();
  }

  /** A container's batching strategy, marking each part it splits after the first. */
  private static final class Marking implements BatchingStrategy {

    private final BatchingStrategy delegate;

    Marking(BatchingStrategy delegate) {
      this.delegate = delegate;
    }

    @Override
    public @Nullable MessageBatch addToBatch(String exchange, String routingKey, Message message) {
      return delegate.addToBatch(exchange, routingKey, message);
    }

    @Override
    public @Nullable Date nextRelease() {
      return delegate.nextRelease();
    }

    @Override
    public Collection<MessageBatch> releaseBatches() {
      return delegate.releaseBatches();
    }

    @Override
    public boolean canDebatch(MessageProperties properties) {
      return delegate.canDebatch(properties);
    }

    @Override
    public void deBatch(Message message, Consumer<Message> fragmentConsumer) {
      int[] position = {0};
      delegate.deBatch(
          message,
          fragment -> {
            int part = position[0]++;
            fragmentConsumer.accept(part == 0 ? fragment : marked(fragment, part));
          });
    }

    /** The part with properties of its own (not the batch message's, which others share). */
    private static Message marked(Message fragment, int part) {
      MessageProperties shared = fragment.getMessageProperties();
      MessageProperties own = new MessageProperties();
      BeanUtils.copyProperties(shared, own);
      own.getHeaders().putAll(shared.getHeaders());
      own.setHeader(PART, part);
      own.setHeader(PART_OF, boundTo(fragment));
      return new Message(fragment.getBody(), own);
    }
  }
}
