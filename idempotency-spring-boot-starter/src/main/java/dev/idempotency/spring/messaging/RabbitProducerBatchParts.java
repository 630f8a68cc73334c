package dev.idempotency.spring.messaging;

import dev.idempotency.spring.Idempotent;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.util.Collection;
import java.util.Date;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.core.MessageProperties;
import org.springframework.amqp.rabbit.batch.BatchingStrategy;
import org.springframework.amqp.rabbit.batch.MessageBatch;
import org.springframework.amqp.rabbit.listener.AbstractMessageListenerContainer;
import org.springframework.beans.BeanUtils;
import org.springframework.core.DefaultParameterNameDiscoverer;
import org.springframework.core.MethodParameter;
import org.springframework.core.ResolvableType;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.core.annotation.AnnotatedMethod;
import org.springframework.expression.spel.SpelNode;
import org.springframework.expression.spel.ast.CompoundExpression;
import org.springframework.expression.spel.ast.MethodReference;
import org.springframework.expression.spel.ast.Projection;
import org.springframework.expression.spel.ast.PropertyOrFieldReference;
import org.springframework.expression.spel.ast.Selection;
import org.springframework.expression.spel.ast.VariableReference;
import org.springframework.expression.spel.standard.SpelExpression;
import org.springframework.expression.spel.standard.SpelExpressionParser;
import org.springframework.messaging.handler.annotation.Header;
import org.springframework.messaging.handler.annotation.Headers;
import org.springframework.messaging.support.MessageHeaderAccessor;
import org.springframework.util.ReflectionUtils;

/**
 * Keeps the starter from reading a header key of one message of a producer's batch ({@code
 * BatchingRabbitTemplate}) as another's. Spring AMQP's {@code SimpleBatchingStrategy} keeps the
 * first message's headers only, and its {@code deBatch} hands every part the batch message's
 * properties (shared, or copied for the last part): each part would carry the first message's key,
 * and be acknowledged as its replay, unsent. The starter cannot know at startup whether a producer
 * batches, so each Spring AMQP container's {@link BatchingStrategy} is wrapped ({@link #markIn}):
 * every part after the first gets properties of its own with a {@link #PART} header, and the
 * starter reads no header of such a part ({@link #headersOf}). A header-keyed listener then finds
 * no key for it and rejects it without requeue, nothing sent ({@link
 * MissingIdempotencyKeyException}); a key read from the payload is each part's own and works. The
 * first part keeps the batch message's headers, which are its own.
 *
 * <p>Spring resolves a listener method's {@code @Header} parameters, a {@code Message}, and the
 * rest from the part's headers, the first message's: a guarded record listener whose key may read
 * anything but the payload ({@link #keyedByPayload}) has each marked part rejected before the
 * listener runs ({@link RabbitDeliveryAdvice}). Only the containers of guarded listeners are
 * marked; a strategy the application sets on one after the start is wrapped again at its next
 * delivery ({@link #markedAgain}), which is requeued.
 */
final class RabbitProducerBatchParts {

  /**
   * The header the starter puts on each part of a producer's batch after the first: its position in
   * the batch (1 for the second part).
   */
  static final String PART = "idempotency_producerBatchPart";

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

  /** Whether {@code message} is a part after the first of a producer's batch (marked). */
  static boolean isMarked(Message message) {
    return message.getMessageProperties().getHeaders().containsKey(PART);
  }

  /**
   * Whether every guarded listener method of the container reads its key from the payload only:
   * {@code #payload}, the payload's properties, or payload parameters ({@code #p0}, {@code #a1}, a
   * parameter's name) that are no {@code @Header} or {@code @Headers} parameter, {@code Message},
   * AMQP {@code Message}, {@code MessageProperties}, {@code MessageHeaders} or channel. Anything
   * else ({@code #headers}, {@code #root} over a message, a variable it does not know, a header
   * key) counts as read from the headers.
   */
  static boolean keyedByPayload(AbstractMessageListenerContainer rabbit) {
    for (Method method : UnsupportedRabbitContainers.guardedMethods(rabbit)) {
      if (!keyedByPayload(method)) {
        return false;
      }
    }
    return true;
  }

  static boolean keyedByPayload(Method method) {
    IdempotentListener listener =
        AnnotatedElementUtils.findMergedAnnotation(method, IdempotentListener.class);
    if (listener != null) {
      // the root object is the first argument, #payload its payload
      return !listener.key().isEmpty()
          && keyedByPayload(listener.key(), method, payloadParameter(method, 0), true);
    }
    Idempotent idempotent = AnnotatedElementUtils.findMergedAnnotation(method, Idempotent.class);
    // the root object is the listener's bean
    return idempotent == null || keyedByPayload(idempotent.key(), method, true, false);
  }

  private static boolean keyedByPayload(
      String key, Method method, boolean rootIsPayload, boolean payloadVariable) {
    SpelNode ast;
    try {
      ast = ((SpelExpression) new SpelExpressionParser().parseExpression(key)).getAST();
    } catch (RuntimeException invalid) {
      return false;
    }
    return payloadOnly(ast, true, method, rootIsPayload, payloadVariable);
  }

  private static boolean payloadOnly(
      SpelNode node,
      boolean atRoot,
      Method method,
      boolean rootIsPayload,
      boolean payloadVariable) {
    if (node instanceof VariableReference) {
      String name = node.toStringAST().substring(1);
      if (name.equals("this") ? atRoot : name.equals("root")) {
        return rootIsPayload;
      }
      if (!name.equals("this")
          && !(payloadVariable && name.equals("payload") && payloadVariableIsPayload(method))
          && !payloadParameterNamed(method, name)) {
        return false;
      }
    } else if ((node instanceof PropertyOrFieldReference || node instanceof MethodReference)
        && atRoot
        && !rootIsPayload) {
      return false;
    }
    boolean compound = node instanceof CompoundExpression;
    boolean overElements = node instanceof Selection || node instanceof Projection;
    for (int i = 0; i < node.getChildCount(); i++) {
      boolean childAtRoot = compound ? i == 0 && atRoot : !overElements;
      if (!payloadOnly(node.getChild(i), childAtRoot, method, rootIsPayload, payloadVariable)) {
        return false;
      }
    }
    return true;
  }

  /**
   * Whether an {@link IdempotentListener}'s {@code #payload}, the payload of its first argument
   * (that argument itself unless it is a Spring {@code Message}), is read from the payload: not
   * when the first parameter is an AMQP {@code Message}, its properties or a header.
   */
  private static boolean payloadVariableIsPayload(Method method) {
    if (method.getParameterCount() == 0 || payloadParameter(method, 0)) {
      return true;
    }
    MethodParameter first = parameterOf(method, 0);
    if (first.hasParameterAnnotation(Header.class) || first.hasParameterAnnotation(Headers.class)) {
      return false;
    }
    ResolvableType type = ResolvableType.forMethodParameter(first);
    if (Collection.class.isAssignableFrom(type.toClass())) {
      type = type.asCollection().getGeneric(0);
    }
    return org.springframework.messaging.Message.class.isAssignableFrom(type.toClass());
  }

  /** Whether {@code name} ({@code p0}, {@code a0} or a parameter's name) is a payload parameter. */
  private static boolean payloadParameterNamed(Method method, String name) {
    if (name.matches("[pa]\\d+")) {
      int index = Integer.parseInt(name.substring(1));
      return index < method.getParameterCount() && payloadParameter(method, index);
    }
    String[] names = new DefaultParameterNameDiscoverer().getParameterNames(method);
    if (names != null) {
      for (int i = 0; i < names.length; i++) {
        if (names[i].equals(name)) {
          return payloadParameter(method, i);
        }
      }
    }
    return false;
  }

  /** Whether the parameter at {@code index} is resolved from the payload, not the headers. */
  private static boolean payloadParameter(Method method, int index) {
    if (index >= method.getParameterCount()) {
      return false;
    }
    MethodParameter parameter = parameterOf(method, index);
    if (parameter.hasParameterAnnotation(Header.class)
        || parameter.hasParameterAnnotation(Headers.class)) {
      return false;
    }
    ResolvableType type = ResolvableType.forMethodParameter(parameter);
    if (Collection.class.isAssignableFrom(type.toClass())) {
      type = type.asCollection().getGeneric(0);
    }
    Class<?> raw = type.toClass();
    return !(org.springframework.messaging.Message.class.isAssignableFrom(raw)
        || Message.class.isAssignableFrom(raw)
        || MessageProperties.class.isAssignableFrom(raw)
        || org.springframework.messaging.MessageHeaders.class.isAssignableFrom(raw)
        || MessageHeaderAccessor.class.isAssignableFrom(raw)
        || raw.getName().equals("com.rabbitmq.client.Channel"));
  }

  /**
   * The parameter at {@code index} with its annotations as Spring resolves the listener's
   * arguments: those declared on the method of an interface or superclass it implements too.
   */
  private static MethodParameter parameterOf(Method method, int index) {
    return new AnnotatedMethod(method).getMethodParameters()[index];
  }

  /**
   * The headers the starter may read a key from: none for a part after the first of a producer's
   * batch (it carries the first message's), else the message's own.
   */
  static Map<String, Object> headersOf(Message message) {
    Map<String, Object> headers = message.getMessageProperties().getHeaders();
    return headers.containsKey(PART) ? Map.of() : headers;
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
      return new Message(fragment.getBody(), own);
    }
  }
}
