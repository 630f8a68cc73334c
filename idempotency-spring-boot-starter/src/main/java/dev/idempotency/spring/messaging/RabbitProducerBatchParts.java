package dev.idempotency.spring.messaging;

import com.rabbitmq.client.Channel;
import dev.idempotency.spring.Idempotent;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Date;
import java.util.HashSet;
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
import org.springframework.amqp.rabbit.listener.adapter.HandlerAdapter;
import org.springframework.aop.support.AopUtils;
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
import org.springframework.messaging.handler.annotation.support.MessageMethodArgumentResolver;
import org.springframework.messaging.handler.annotation.support.PayloadMethodArgumentResolver;
import org.springframework.messaging.handler.invocation.HandlerMethodArgumentResolver;
import org.springframework.messaging.handler.invocation.HandlerMethodArgumentResolverComposite;
import org.springframework.messaging.handler.invocation.InvocableHandlerMethod;
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
   * provably is ({@link #keyedByPayload(Method, Arguments)}): for an annotated listener method, by
   * the argument resolvers Spring resolves its arguments with (the container's {@code
   * MessageHandlerMethodFactory}'s, the application's own ones included); if they cannot be read,
   * it counts as read from the headers (the part rejected, never lost).
   *
   * <p>A class-level {@code @RabbitListener} is decided per handler: Spring AMQP picks its
   * {@code @RabbitHandler} by the type of the converted payload, inside the listener adapter, after
   * the container's advices ran. Converting the part here to find that handler would run the
   * application's message converter twice, so the guard of the handler Spring picked refuses the
   * part instead, right before it runs ({@link PickedHandlers}); an unguarded handler, or one keyed
   * by its payload, takes it.
   */
  static PartsRule partsRuleOf(AbstractMessageListenerContainer rabbit) {
    HandlerMethods handlers = handlerMethodsOf(rabbit);
    Set<Method> refusing = new HashSet<>();
    List<Method> guarded = UnsupportedRabbitContainers.guardedMethods(rabbit);
    for (Method method : guarded) {
      if (!keyedByPayload(method, handlers.argumentsOf(method))) {
        refusing.add(method);
      }
    }
    if (handlers.classLevel()) {
      return new PartsRule(false, Set.copyOf(refusing), Set.copyOf(guarded));
    }
    return new PartsRule(!refusing.isEmpty(), Set.of(), Set.of());
  }

  /**
   * Whether a guarded listener method reads its key from the payload only, by its declaration:
   * {@code #payload}, the payload's properties, or payload parameters ({@code #p0}, {@code #a1}, a
   * parameter's name) that are no {@code @Header} or {@code @Headers} parameter, {@code Message},
   * AMQP {@code Message}, {@code MessageProperties}, {@code MessageHeaders} or channel. Anything
   * else ({@code #headers}, {@code #root} over a message, a variable it does not know, a header
   * key) counts as read from the headers. For a method whose arguments Spring's argument resolvers
   * give ({@code @RabbitListener}, {@code @RabbitHandler}), {@link #keyedByPayload(
   * InvocableHandlerMethod)} says more: a parameter may be resolved by the application's own
   * resolver.
   */
  static boolean keyedByPayload(Method method) {
    return keyedByPayload(method, Arguments.declared(method));
  }

  /**
   * Whether a listener method that Spring invokes through {@code handler} reads its key from the
   * payload only: as {@link #keyedByPayload(Method)}, where a payload parameter is one that
   * Spring's payload resolver resolves (not an argument Spring AMQP provides by type, such as the
   * AMQP {@code Message} of an {@code Object} parameter, nor one that an earlier resolver of the
   * handler supports, the application's own ones included).
   */
  static boolean keyedByPayload(InvocableHandlerMethod handler) {
    return keyedByPayload(handler.getMethod(), Arguments.resolvedBy(handler));
  }

  private static boolean keyedByPayload(Method method, Arguments arguments) {
    IdempotentListener listener =
        AnnotatedElementUtils.findMergedAnnotation(method, IdempotentListener.class);
    if (listener != null) {
      // the root object is the first argument, #payload its payload
      return !listener.key().isEmpty()
          && keyedByPayload(listener.key(), method, arguments, arguments.payload(0), true);
    }
    Idempotent idempotent = AnnotatedElementUtils.findMergedAnnotation(method, Idempotent.class);
    // the root object is the listener's bean
    return idempotent == null || keyedByPayload(idempotent.key(), method, arguments, true, false);
  }

  private static boolean keyedByPayload(
      String key,
      Method method,
      Arguments arguments,
      boolean rootIsPayload,
      boolean payloadVariable) {
    SpelNode ast;
    try {
      ast = ((SpelExpression) new SpelExpressionParser().parseExpression(key)).getAST();
    } catch (RuntimeException invalid) {
      return false;
    }
    return payloadOnly(ast, true, method, arguments, rootIsPayload, payloadVariable);
  }

  private static boolean payloadOnly(
      SpelNode node,
      boolean atRoot,
      Method method,
      Arguments arguments,
      boolean rootIsPayload,
      boolean payloadVariable) {
    if (node instanceof VariableReference) {
      String name = node.toStringAST().substring(1);
      if (name.equals("this") ? atRoot : name.equals("root")) {
        return rootIsPayload;
      }
      if (!name.equals("this")
          && !(payloadVariable && name.equals("payload") && payloadVariableIsPayload(arguments))
          && !payloadParameterNamed(method, arguments, name)) {
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
      if (!payloadOnly(
          node.getChild(i), childAtRoot, method, arguments, rootIsPayload, payloadVariable)) {
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
  private static boolean payloadVariableIsPayload(Arguments arguments) {
    return arguments.count() == 0 || arguments.payload(0) || arguments.messageOfPayload(0);
  }

  /** Whether {@code name} ({@code p0}, {@code a0} or a parameter's name) is a payload parameter. */
  private static boolean payloadParameterNamed(Method method, Arguments arguments, String name) {
    if (name.matches("[pa]\\d+")) {
      int index = Integer.parseInt(name.substring(1));
      return arguments.payload(index);
    }
    String[] names = new DefaultParameterNameDiscoverer().getParameterNames(method);
    if (names != null) {
      for (int i = 0; i < names.length; i++) {
        if (names[i].equals(name)) {
          return arguments.payload(i);
        }
      }
    }
    return false;
  }

  /**
   * Where a listener method's arguments come from, as far as its key is concerned: from its
   * declaration ({@link #declared}), or as Spring's argument resolvers of its handler give them
   * ({@link #resolvedBy}). An index past the parameters is no payload.
   */
  private interface Arguments {

    /** The number of parameters. */
    int count();

    /** Whether the argument at {@code index} is the payload (or a collection of payloads). */
    boolean payload(int index);

    /** Whether the argument at {@code index} is a Spring {@code Message} of the payload. */
    boolean messageOfPayload(int index);

    /** By the parameters' declarations (annotations, those of the methods it implements too). */
    static Arguments declared(Method method) {
      return new Arguments() {
        @Override
        public int count() {
          return method.getParameterCount();
        }

        @Override
        public boolean payload(int index) {
          return index < count() && payloadDeclared(parameterOf(method, index));
        }

        @Override
        public boolean messageOfPayload(int index) {
          return index < count() && messageDeclared(parameterOf(method, index));
        }
      };
    }

    /**
     * As Spring invokes {@code handler}: an argument Spring AMQP provides by type comes first (the
     * AMQP {@code Message}, its {@code MessageProperties}, the {@code Channel}: to any parameter of
     * a type they are instances of), then the first of the handler's argument resolvers that
     * supports the parameter (header and message resolvers, then the application's own, then the
     * payload resolver, which takes any parameter). The handler's resolvers are read from its field
     * (Spring has no getter): if they cannot be, no argument counts as the payload.
     */
    static Arguments resolvedBy(InvocableHandlerMethod handler) {
      MethodParameter[] parameters = handler.getMethodParameters();
      List<HandlerMethodArgumentResolver> resolvers = resolversOf(handler);
      return new Arguments() {
        @Override
        public int count() {
          return parameters.length;
        }

        @Override
        public boolean payload(int index) {
          return index < count()
              && payloadDeclared(parameters[index])
              && resolverOf(parameters[index], resolvers) instanceof PayloadMethodArgumentResolver;
        }

        @Override
        public boolean messageOfPayload(int index) {
          return index < count()
              && messageDeclared(parameters[index])
              && resolverOf(parameters[index], resolvers) instanceof MessageMethodArgumentResolver;
        }
      };
    }
  }

  /** Whether a parameter is declared so that it takes the payload, not the headers. */
  private static boolean payloadDeclared(MethodParameter parameter) {
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

  /** Whether a parameter is declared a Spring {@code Message} (or a collection of them). */
  private static boolean messageDeclared(MethodParameter parameter) {
    if (parameter.hasParameterAnnotation(Header.class)
        || parameter.hasParameterAnnotation(Headers.class)) {
      return false;
    }
    ResolvableType type = ResolvableType.forMethodParameter(parameter);
    if (Collection.class.isAssignableFrom(type.toClass())) {
      type = type.asCollection().getGeneric(0);
    }
    return org.springframework.messaging.Message.class.isAssignableFrom(type.toClass());
  }

  /**
   * The resolver Spring resolves {@code parameter} with, or {@code null} if an argument Spring AMQP
   * provides by type takes it (a record listener gets the AMQP {@code Message}, the {@code Channel}
   * and the {@code MessageProperties} so) or no resolver supports it.
   */
  private static @Nullable HandlerMethodArgumentResolver resolverOf(
      MethodParameter parameter, List<HandlerMethodArgumentResolver> resolvers) {
    Class<?> type = parameter.getParameterType();
    if (type.isAssignableFrom(Message.class)
        || type.isAssignableFrom(MessageProperties.class)
        || type.isAssignableFrom(Channel.class)) {
      return null;
    }
    for (HandlerMethodArgumentResolver resolver : resolvers) {
      if (resolver.supportsParameter(parameter)) {
        return resolver;
      }
    }
    return null;
  }

  /** The argument resolvers of a handler (its private field), none if they cannot be read. */
  private static List<HandlerMethodArgumentResolver> resolversOf(InvocableHandlerMethod handler) {
    try {
      if (ListenerContainerHooks.current(handler, "getResolvers", "resolvers")
          instanceof HandlerMethodArgumentResolverComposite composite) {
        return composite.getResolvers();
      }
    } catch (RuntimeException unreadable) {
      // no payload parameter, then: the part is rejected, never lost
    }
    return List.of();
  }

  /**
   * The handler methods of a {@code @RabbitListener} container's listener adapter (one, or a
   * class-level listener's {@code @RabbitHandler} methods), read from Spring AMQP's fields (it has
   * no getters for them).
   *
   * @param classLevel whether the listener is a class-level {@code @RabbitListener}
   * @param handlers the handlers; empty for another listener (a {@code MessageListenerAdapter}, a
   *     {@code MessageListener}), whose methods get their arguments as declared
   * @param annotated whether the listener is an annotated one's adapter, whose methods' arguments
   *     only its handlers tell
   * @param type the class of the listener's bean
   */
  private record HandlerMethods(
      boolean classLevel,
      List<InvocableHandlerMethod> handlers,
      boolean annotated,
      @Nullable Class<?> type) {

    /**
     * Where the arguments of {@code method} (the most specific, as the guarded methods are found)
     * come from: as its handler resolves them; as declared if the listener is not an annotated
     * one's; else, its handler not found, none is the payload.
     */
    Arguments argumentsOf(Method method) {
      if (!annotated) {
        return Arguments.declared(method);
      }
      for (InvocableHandlerMethod handler : handlers) {
        if (type != null
            && AopUtils.getMostSpecificMethod(handler.getMethod(), type).equals(method)) {
          return Arguments.resolvedBy(handler);
        }
      }
      return NO_PAYLOAD;
    }
  }

  /** Arguments of which none is the payload: where Spring's resolution cannot be known. */
  private static final Arguments NO_PAYLOAD =
      new Arguments() {
        @Override
        public int count() {
          return Integer.MAX_VALUE;
        }

        @Override
        public boolean payload(int index) {
          return false;
        }

        @Override
        public boolean messageOfPayload(int index) {
          return false;
        }
      };

  private static HandlerMethods handlerMethodsOf(AbstractMessageListenerContainer rabbit) {
    Object listener = rabbit.getMessageListener();
    HandlerAdapter adapter =
        listener == null ? null : UnsupportedRabbitContainers.handlerOf(listener);
    if (adapter == null) {
      return new HandlerMethods(false, List.of(), false, null);
    }
    Class<?> type = AopUtils.getTargetClass(adapter.getBean());
    try {
      // Spring AMQP's DelegatingInvocableHandler, read by its fields only
      Object delegating =
          ListenerContainerHooks.current(adapter, "getDelegatingHandler", "delegatingHandler");
      if (delegating != null) {
        List<InvocableHandlerMethod> handlers = new ArrayList<>();
        if (ListenerContainerHooks.current(delegating, "getHandlers", "handlers")
            instanceof List<?> all) {
          for (Object each : all) {
            if (each instanceof InvocableHandlerMethod handler) {
              handlers.add(handler);
            }
          }
        }
        if (ListenerContainerHooks.current(delegating, "getDefaultHandler", "defaultHandler")
            instanceof InvocableHandlerMethod fallback) {
          handlers.add(fallback);
        }
        return new HandlerMethods(true, handlers, true, type);
      }
      if (ListenerContainerHooks.current(adapter, "getInvokerHandlerMethod", "invokerHandlerMethod")
          instanceof InvocableHandlerMethod handler) {
        return new HandlerMethods(false, List.of(handler), true, type);
      }
    } catch (RuntimeException unreadable) {
      // the handlers unknown: no key counts as read from the payload (parts rejected)
    }
    return new HandlerMethods(isClassLevel(adapter), List.of(), true, type);
  }

  /** Whether an adapter's listener is class-level (Spring AMQP picks its method by payload). */
  private static boolean isClassLevel(HandlerAdapter adapter) {
    try {
      adapter.getMethodFor(null);
      return false;
    } catch (RuntimeException classLevel) {
      return true;
    }
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
