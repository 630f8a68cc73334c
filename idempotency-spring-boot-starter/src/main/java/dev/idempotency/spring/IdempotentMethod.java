package dev.idempotency.spring;

import dev.idempotency.SendContext;
import dev.idempotency.spring.messaging.ListenerEndpointMethods;
import java.lang.reflect.Method;
import java.lang.reflect.Type;
import java.time.Duration;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
import org.springframework.context.expression.MethodBasedEvaluationContext;
import org.springframework.core.ParameterNameDiscoverer;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.expression.EvaluationException;
import org.springframework.expression.Expression;
import org.springframework.expression.spel.standard.SpelExpressionParser;
import org.springframework.util.ClassUtils;

/**
 * One {@link Idempotent} method as the starter runs it, worked out and checked once, when its bean
 * is proxied: the operation name, the parsed key and fingerprint expressions (whose variables must
 * be parameters), the window (longer than the lease), a {@link SendContext} parameter if it has
 * one, and how the method returns (a value, nothing, a stage or a Mono).
 */
final class IdempotentMethod {

  /** How the method returns its result. */
  enum Kind {
    VALUE,
    VOID,
    STAGE,
    /** A Reactor {@code Mono}: run per subscription through the guard's asynchronous call. */
    MONO
  }

  final String name;
  final boolean defaultName;
  final Duration ttl;
  final Kind kind;
  final Type resultType;
  final Method method;
  final Class<?> userClass;

  /** Whether the call joins the caller's transaction ({@link Idempotent#joinTransaction()}). */
  final boolean joinTransaction;

  /** The index of a {@link SendContext} parameter, which the call's context replaces; or -1. */
  final int sendContextIndex;

  /** Whether the method carries a listener annotation (Spring Kafka's, JMS's or Spring AMQP's). */
  private final boolean annotatedListener;

  /**
   * Whether the method is a message listener: it carries a listener annotation, or a listener
   * container was created for an endpoint of it ({@link ListenerEndpointMethods}, an endpoint the
   * application registered itself). In a listener container's transaction its outcome waits for the
   * commit. A method merely called from a listener is not one.
   */
  boolean listener() {
    return annotatedListener || ListenerEndpointMethods.contains(method);
  }

  /** The method as messages name it: {@code @Idempotent(name = "n") on a.B.send(..)}. */
  String where() {
    return "@Idempotent(name = \""
        + name
        + "\") on "
        + userClass.getName()
        + "."
        + method.getName()
        + "(..)";
  }

  private final Expression key;
  private final String keySource;
  private final @Nullable Expression fingerprint;
  private final ParameterNameDiscoverer parameterNames;

  private IdempotentMethod(
      Method method,
      Class<?> userClass,
      String name,
      boolean defaultName,
      Expression key,
      String keySource,
      @Nullable Expression fingerprint,
      Duration ttl,
      Kind kind,
      Type resultType,
      int sendContextIndex,
      ParameterNameDiscoverer parameterNames,
      boolean joinTransaction) {
    this.method = method;
    this.joinTransaction = joinTransaction;
    this.annotatedListener = isListener(method);
    this.userClass = userClass;
    this.name = name;
    this.defaultName = defaultName;
    this.key = key;
    this.keySource = keySource;
    this.fingerprint = fingerprint;
    this.ttl = ttl;
    this.kind = kind;
    this.resultType = resultType;
    this.sendContextIndex = sendContextIndex;
    this.parameterNames = parameterNames;
  }

  /**
   * Works out and checks an annotated method.
   *
   * @throws IllegalStateException naming the method and the problem, so that the application fails
   *     at startup
   */
  static IdempotentMethod of(
      Method method,
      Class<?> targetClass,
      Idempotent annotation,
      SpelExpressionParser parser,
      ParameterNameDiscoverer parameterNames,
      Function<@Nullable String, Duration> ttlOf,
      @Nullable Duration lease) {
    Class<?> userClass = ClassUtils.getUserClass(targetClass);
    String where = "@Idempotent on " + userClass.getName() + "." + method.getName() + "(..)";
    boolean defaultName = annotation.name().isEmpty();
    String name = NameAttribute.of(where, annotation.name(), userClass, method);
    Expression key = parse(where, "key", annotation.key(), parser);
    checkVariables(where, "key", method, annotation.key(), key, parameterNames);
    Expression fingerprint = null;
    if (!annotation.fingerprint().isEmpty()) {
      fingerprint = parse(where, "fingerprint", annotation.fingerprint(), parser);
      checkVariables(
          where, "fingerprint", method, annotation.fingerprint(), fingerprint, parameterNames);
    }
    Duration ttl = TtlAttribute.parse(where, annotation.ttl(), name, ttlOf, lease);
    int sendContextIndex = sendContextIndex(where, method);
    MethodResult result = MethodResult.of(where, method, targetClass);
    if (annotation.joinTransaction()) {
      checkJoining(where, method, userClass, result.kind());
    }
    return new IdempotentMethod(
        method,
        userClass,
        name,
        defaultName,
        key,
        annotation.key(),
        fingerprint,
        ttl,
        result.kind(),
        result.type(),
        sendContextIndex,
        parameterNames,
        annotation.joinTransaction());
  }

  /** Refuses what a joining method cannot be: asynchronous, or its own transaction's owner. */
  private static void checkJoining(String where, Method method, Class<?> userClass, Kind kind) {
    if (kind == Kind.STAGE || kind == Kind.MONO) {
      throw new IdempotencyConfigurationException(
          where
              + " has joinTransaction = true and returns "
              + (kind == Kind.STAGE ? "a CompletionStage" : "a Mono")
              + ": a transaction is bound to the calling thread, and an asynchronous result would"
              + " complete outside it.",
          "Return the value itself, or remove joinTransaction.");
    }
    if (isTransactional(method) || isTransactional(userClass)) {
      throw new IdempotencyConfigurationException(
          where
              + " has joinTransaction = true and is itself @Transactional: its transaction would"
              + " begin inside the guard, after the claim.",
          "Remove @Transactional from it and call"
              + " it from inside a transaction (the caller's @Transactional method or a"
              + " TransactionTemplate).");
    }
  }

  /** The listener annotations, known by name: each framework is optional. */
  private static final String[] LISTENER_ANNOTATIONS = {
    "org.springframework.kafka.annotation.KafkaListener",
    "org.springframework.kafka.annotation.KafkaHandler",
    "org.springframework.jms.annotation.JmsListener",
    "org.springframework.amqp.rabbit.annotation.RabbitListener",
    "org.springframework.amqp.rabbit.annotation.RabbitHandler"
  };

  private static boolean isListener(Method method) {
    for (String name : LISTENER_ANNOTATIONS) {
      if (AnnotatedElementUtils.hasAnnotation(method, annotationClass(name))) {
        return true;
      }
    }
    return false;
  }

  /** Spring's or Jakarta's {@code @Transactional}, known by name: spring-tx is optional. */
  private static boolean isTransactional(java.lang.reflect.AnnotatedElement element) {
    for (String name :
        new String[] {
          "org.springframework.transaction.annotation.Transactional",
          "jakarta.transaction.Transactional"
        }) {
      if (AnnotatedElementUtils.hasAnnotation(element, annotationClass(name))) {
        return true;
      }
    }
    return false;
  }

  @SuppressWarnings("unchecked")
  private static Class<? extends java.lang.annotation.Annotation> annotationClass(String name) {
    try {
      return (Class<? extends java.lang.annotation.Annotation>)
          ClassUtils.forName(name, IdempotentMethod.class.getClassLoader());
    } catch (ClassNotFoundException | LinkageError e) {
      return Absent.class;
    }
  }

  /** Stands in for an annotation type that is not on the classpath: nothing carries it. */
  @java.lang.annotation.Retention(java.lang.annotation.RetentionPolicy.RUNTIME)
  private @interface Absent {}

  /** The one {@link SendContext} parameter a guarded method may declare, or -1. */
  private static int sendContextIndex(String where, Method method) {
    int index = -1;
    Class<?>[] types = method.getParameterTypes();
    for (int i = 0; i < types.length; i++) {
      if (SendContext.class.equals(types[i])) {
        if (index >= 0) {
          throw new IdempotencyConfigurationException(
              where + " declares more than one SendContext parameter.",
              "Keep one SendContext parameter.");
        }
        index = i;
      }
    }
    return index;
  }

  private static Expression parse(
      String where, String attribute, String source, SpelExpressionParser parser) {
    if (source.isBlank()) {
      throw new IdempotencyConfigurationException(
          where + " has an empty " + attribute + " expression.",
          "Write a SpEL expression over the method's parameters, such as #orderId"
              + ("key".equals(attribute) ? "." : ", or leave " + attribute + " out."));
    }
    return ExpressionAttributes.parse(where, attribute, source, parser);
  }

  /** Every {@code #variable} must be a parameter (by name, or {@code #p0}/{@code #a0}). */
  private static void checkVariables(
      String where,
      String attribute,
      Method method,
      String source,
      Expression expression,
      ParameterNameDiscoverer parameterNames) {
    String[] names = parameterNames.getParameterNames(method);
    ExpressionAttributes.checkVariables(
        where,
        attribute,
        source,
        expression,
        variable -> ExpressionAttributes.parameterProblem(variable, method, names, ""));
  }

  /**
   * The key expression's value for one call (the guard's key is the name, then this).
   *
   * @throws InvalidKeyException if the expression cannot be evaluated for these arguments (a
   *     property they lack, a method called on null, an index out of range: SpEL's error is the
   *     cause), or yields null
   * @throws EvaluationException if a method, getter or constructor the expression calls threw: its
   *     own failure, which may pass
   * @throws IllegalArgumentException if the value's text would change on every call
   */
  String keyValue(@Nullable Object target, Object[] arguments) {
    Object value;
    try {
      value = key.getValue(context(target, arguments));
    } catch (EvaluationException e) {
      if (!ExpressionAttributes.failedOnItsInput(e)) {
        throw e;
      }
      // the same for the same arguments every time: bad input, not a failure to retry (a
      // listener's message with it is a poison message)
      throw new InvalidKeyException(
          "the key '"
              + keySource
              + "' of "
              + name
              + " cannot be evaluated for these arguments ("
              + e.getClass().getSimpleName()
              + ", the cause below); nothing ran",
          e);
    }
    if (value == null) {
      throw new InvalidKeyException(
          "the key '" + keySource + "' of " + name + " evaluated to null; nothing ran", null);
    }
    String instability = KeyValues.instability(value);
    if (instability != null) {
      throw new IllegalArgumentException(
          "the key '"
              + keySource
              + "' of "
              + name
              + " is "
              + instability
              + "; nothing ran. Pick a value that identifies the call (#event.orderId), or give"
              + " its class a toString() of its identifying values (a record has one)");
    }
    return value.toString();
  }

  /**
   * The request fingerprint of one call: the {@link Idempotent#fingerprint()} expression's value,
   * written as JSON with the application's mapper and fingerprinted with {@link JsonFingerprints};
   * or {@code null} if the method has none.
   */
  @Nullable String fingerprint(@Nullable Object target, Object[] arguments, JsonCodecs json) {
    if (fingerprint == null) {
      return null;
    }
    Object value = fingerprint.getValue(context(target, arguments));
    if (value == null) {
      return JsonFingerprints.of(null);
    }
    try {
      byte[] written = json.codecFor(value.getClass()).encode(value);
      return json.fingerprint(written);
    } catch (Exception e) {
      throw new IllegalArgumentException(
          "the fingerprint of "
              + name
              + " is a "
              + value.getClass().getName()
              + " that the JSON mapper cannot write: "
              + e.getMessage(),
          e);
    }
  }

  boolean hasFingerprint() {
    return fingerprint != null;
  }

  private MethodBasedEvaluationContext context(@Nullable Object target, Object[] arguments) {
    return new MethodBasedEvaluationContext(target, method, arguments, parameterNames);
  }
}
