package dev.idempotency.spring.messaging;

import com.rabbitmq.client.Channel;
import dev.idempotency.spring.ExpressionAttributes;
import dev.idempotency.spring.Idempotent;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.jspecify.annotations.Nullable;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.core.MessageProperties;
import org.springframework.amqp.rabbit.listener.AbstractMessageListenerContainer;
import org.springframework.amqp.rabbit.listener.adapter.HandlerAdapter;
import org.springframework.aop.support.AopUtils;
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
import org.springframework.messaging.handler.annotation.Header;
import org.springframework.messaging.handler.annotation.Headers;
import org.springframework.messaging.handler.annotation.support.MessageMethodArgumentResolver;
import org.springframework.messaging.handler.annotation.support.PayloadMethodArgumentResolver;
import org.springframework.messaging.handler.invocation.HandlerMethodArgumentResolver;
import org.springframework.messaging.handler.invocation.HandlerMethodArgumentResolverComposite;
import org.springframework.messaging.handler.invocation.InvocableHandlerMethod;
import org.springframework.messaging.support.MessageHeaderAccessor;

/**
 * Whether a guarded RabbitMQ listener method reads its key from the payload only, for {@link
 * RabbitProducerBatchParts}: a later part of a producer's batch carries the first message's
 * headers, so a key read from anything else would be the first's. By the method's declaration, or,
 * for an annotated listener, by the argument resolvers Spring resolves its arguments with (read
 * from Spring AMQP's listener adapter and handlers, which have no getters: unreadable means "not
 * the payload", the part rejected, never lost). Stateless.
 */
final class PayloadKeys {

  private PayloadKeys() {}

  /**
   * What a container's guarded listener methods read their keys from.
   *
   * @param classLevel whether its listener is a class-level {@code @RabbitListener}, whose
   *     {@code @RabbitHandler} Spring picks per message
   * @param notKeyedByPayload the guarded methods whose key may read anything but the payload
   */
  record Reading(boolean classLevel, Set<Method> notKeyedByPayload) {}

  /** Reads {@code guarded}, the guarded listener methods of {@code rabbit}'s listener. */
  static Reading read(AbstractMessageListenerContainer rabbit, List<Method> guarded) {
    HandlerMethods handlers = handlerMethodsOf(rabbit);
    Set<Method> notKeyed = new HashSet<>();
    for (Method method : guarded) {
      if (!keyedByPayload(method, handlers.argumentsOf(method))) {
        notKeyed.add(method);
      }
    }
    return new Reading(handlers.classLevel(), Set.copyOf(notKeyed));
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
      ast = ((SpelExpression) ExpressionAttributes.parser().parseExpression(key)).getAST();
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
    Class<?> raw = unannotatedElementType(parameter);
    return raw != null
        && !(org.springframework.messaging.Message.class.isAssignableFrom(raw)
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
    Class<?> raw = unannotatedElementType(parameter);
    return raw != null && org.springframework.messaging.Message.class.isAssignableFrom(raw);
  }

  /**
   * The declared type of a parameter that is neither {@code @Header} nor {@code @Headers}: of a
   * collection's elements for a collection (a batch listener's); null for an annotated one.
   */
  private static @Nullable Class<?> unannotatedElementType(MethodParameter parameter) {
    if (parameter.hasParameterAnnotation(Header.class)
        || parameter.hasParameterAnnotation(Headers.class)) {
      return null;
    }
    ResolvableType type = ResolvableType.forMethodParameter(parameter);
    if (Collection.class.isAssignableFrom(type.toClass())) {
      type = type.asCollection().getGeneric(0);
    }
    return type.toClass();
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
}
