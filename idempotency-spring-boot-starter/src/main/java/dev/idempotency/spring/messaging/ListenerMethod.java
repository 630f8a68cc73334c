package dev.idempotency.spring.messaging;

import dev.idempotency.IdempotencyKey;
import dev.idempotency.spring.ExpressionAttributes;
import dev.idempotency.spring.IdempotencyConfigurationException;
import dev.idempotency.spring.KeyValues;
import dev.idempotency.spring.NameAttribute;
import dev.idempotency.spring.TtlAttribute;
import java.lang.reflect.Method;
import java.lang.reflect.Type;
import java.time.Duration;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
import org.springframework.context.expression.MethodBasedEvaluationContext;
import org.springframework.core.ParameterNameDiscoverer;
import org.springframework.core.ResolvableType;
import org.springframework.expression.EvaluationContext;
import org.springframework.expression.EvaluationException;
import org.springframework.expression.Expression;
import org.springframework.expression.spel.standard.SpelExpressionParser;
import org.springframework.expression.spel.support.StandardEvaluationContext;
import org.springframework.util.ClassUtils;

/**
 * One {@link IdempotentListener} method as the starter runs it, worked out and checked once, when
 * its bean is proxied: the operation name, where the key comes from (an expression whose variables
 * must exist, or a header), the window, whether it is a batch listener (a {@code List} parameter
 * that is not a header), and how a stored failure is answered.
 */
final class ListenerMethod {

  private static final Set<String> DELIVERY_VARIABLES = Set.of("headers", "payload");

  final String name;
  final boolean defaultName;
  final Duration ttl;
  final boolean acknowledgeStoredFailure;

  /** The index of the batch parameter, or -1 for a record listener. */
  final int batchIndex;

  /**
   * Whether the key is read from the message's headers (a header, or an expression over {@code
   * #headers}), which a batch element must then be matched to its own record for.
   */
  final boolean keyReadsHeaders;

  final Type resultType;
  final Method method;
  final Class<?> userClass;
  private final @Nullable Expression key;
  private final String keySource;
  private final String header;
  private final ParameterNameDiscoverer parameterNames;

  private ListenerMethod(
      Method method,
      Class<?> userClass,
      String name,
      boolean defaultName,
      @Nullable Expression key,
      String keySource,
      String header,
      Duration ttl,
      boolean acknowledgeStoredFailure,
      int batchIndex,
      boolean keyReadsHeaders,
      Type resultType,
      ParameterNameDiscoverer parameterNames) {
    this.method = method;
    this.userClass = userClass;
    this.name = name;
    this.defaultName = defaultName;
    this.key = key;
    this.keySource = keySource;
    this.header = header;
    this.ttl = ttl;
    this.acknowledgeStoredFailure = acknowledgeStoredFailure;
    this.batchIndex = batchIndex;
    this.keyReadsHeaders = keyReadsHeaders;
    this.resultType = resultType;
    this.parameterNames = parameterNames;
  }

  /**
   * Works out and checks an annotated listener method.
   *
   * @param defaultHeader the header of listeners that name neither key nor header
   * @param acknowledgeByDefault what {@link IdempotentListener.StoredFailure#DEFAULT} means
   * @param ttlOf the window of listeners that name none, by operation name
   * @param lease the guard's lease, which the window must be longer than; {@code null}: unknown
   * @throws IllegalStateException naming the method and the problem, so that the application fails
   *     at startup
   */
  static ListenerMethod of(
      Method method,
      Class<?> targetClass,
      IdempotentListener annotation,
      String defaultHeader,
      boolean acknowledgeByDefault,
      SpelExpressionParser parser,
      ParameterNameDiscoverer parameterNames,
      Function<@Nullable String, Duration> ttlOf,
      @Nullable Duration lease) {
    Class<?> userClass = ClassUtils.getUserClass(targetClass);
    String where =
        "@IdempotentListener on " + userClass.getName() + "." + method.getName() + "(..)";
    boolean defaultName = annotation.name().isEmpty();
    String name = NameAttribute.of(where, annotation.name(), userClass, method);
    if (!annotation.key().isEmpty() && !annotation.header().isEmpty()) {
      throw new IdempotencyConfigurationException(
          where + " names both a key expression and a header.", "Keep one of them.");
    }
    int batchIndex = BatchParameters.indexOf(where, method);
    Expression key = null;
    String header = "";
    boolean keyReadsHeaders = true;
    if (!annotation.key().isEmpty()) {
      if (annotation.key().isBlank()) {
        throw new IdempotencyConfigurationException(
            where + " has a blank key expression.",
            "Write a SpEL expression over the payload (such as \"#event.orderId\"), or set"
                + " header instead.");
      }
      key = ExpressionAttributes.parse(where, "key", annotation.key(), parser);
      keyReadsHeaders =
          checkVariables(where, method, annotation.key(), key, batchIndex >= 0, parameterNames);
    } else {
      header = annotation.header().isEmpty() ? defaultHeader : annotation.header();
      if (header == null || header.isBlank()) {
        throw new IdempotencyConfigurationException(
            where
                + " names no key: the broker's message id or offset is never used, since a"
                + " producer that publishes an event twice gives it two.",
            "Set key (SpEL over the payload, such as \"#event.orderId\") or"
                + " header (such as \"Idempotency-Key\"), or the property"
                + " idempotency.messaging.header.");
      }
    }
    Duration ttl = TtlAttribute.parse(where, annotation.ttl(), name, ttlOf, lease);
    boolean acknowledge =
        switch (annotation.storedFailure()) {
          case ACKNOWLEDGE -> true;
          case DEAD_LETTER -> false;
          case DEFAULT -> acknowledgeByDefault;
        };
    Type resultType = ResolvableType.forMethodReturnType(method, targetClass).getType();
    return new ListenerMethod(
        method,
        userClass,
        name,
        defaultName,
        key,
        annotation.key(),
        header,
        ttl,
        acknowledge,
        batchIndex,
        keyReadsHeaders,
        resultType,
        parameterNames);
  }

  /**
   * Every {@code #variable} must be a parameter (by name, or {@code #p0}/{@code #a0}), {@code
   * #payload} or {@code #headers}; a batch listener's key knows only the latter two.
   *
   * @return whether the expression reads {@code #headers}
   */
  private static boolean checkVariables(
      String where,
      Method method,
      String source,
      Expression expression,
      boolean batch,
      ParameterNameDiscoverer parameterNames) {
    String[] names = parameterNames.getParameterNames(method);
    boolean[] readsHeaders = {false};
    ExpressionAttributes.checkVariables(
        where,
        "key",
        source,
        expression,
        variable -> {
          if (DELIVERY_VARIABLES.contains(variable)) {
            readsHeaders[0] |= variable.equals("headers");
            return null;
          }
          if (batch) {
            return "#"
                + variable
                + " is not known when the method gets a batch: a method that takes a List is"
                + " read as a batch listener (its container may hand out batches), whose key is"
                + " evaluated per message; use the payload's properties (orderId), #payload or"
                + " #headers, which key a record listener of a List payload too (#payload is"
                + " then the whole list)";
          }
          return ExpressionAttributes.parameterProblem(
              variable, method, names, " (and #payload, #headers)");
        });
    return readsHeaders[0];
  }

  /**
   * The key of a record listener's delivery: the operation's name, then the expression's value or
   * the header's.
   *
   * @throws MissingIdempotencyKeyException if the key is missing (null, or no such header)
   * @throws InvalidIdempotencyKeyException if it is unusable, or its expression fails
   */
  String recordKey(Object target, Object[] arguments, Map<String, Object> headers) {
    if (key == null) {
      return fromHeader(headers);
    }
    MethodBasedEvaluationContext context =
        new MethodBasedEvaluationContext(
            arguments.length > 0 ? arguments[0] : null, method, arguments, parameterNames);
    context.setVariable("headers", headers);
    context.setVariable("payload", Messages.payloadOf(arguments.length > 0 ? arguments[0] : null));
    return evaluate(context);
  }

  /**
   * The key of one message of a batch.
   *
   * @throws MissingIdempotencyKeyException if the key is missing
   * @throws InvalidIdempotencyKeyException if it is unusable, or its expression fails
   */
  String elementKey(Object payload, Map<String, Object> headers) {
    if (key == null) {
      return fromHeader(headers);
    }
    StandardEvaluationContext context = new StandardEvaluationContext(payload);
    context.setVariable("headers", headers);
    context.setVariable("payload", payload);
    return evaluate(context);
  }

  private String evaluate(EvaluationContext context) {
    Object value;
    try {
      value = key.getValue(context);
    } catch (EvaluationException e) {
      if (!ExpressionAttributes.failedOnItsInput(e)) {
        // a method or getter the expression calls threw (a look-up that timed out): the
        // look-up's own failure, which may pass; retried as any listener failure
        throw e;
      }
      // the expression itself cannot be worked out for this message (a field it lacks, a method
      // called on null, an index out of range): the same at every redelivery, so a poison message
      // (a batch names its index), never a reason to retry the delivery, nor the whole batch's
      throw new InvalidIdempotencyKeyException(
          "the key '"
              + keySource
              + "' of listener "
              + name
              + " cannot be evaluated for this message ("
              + e.getClass().getSimpleName()
              + ", the cause below); nothing ran",
          e);
    }
    if (value == null) {
      throw new MissingIdempotencyKeyException(
          "the key '" + keySource + "' of listener " + name + " evaluated to null; nothing ran");
    }
    String instability = KeyValues.instability(value);
    if (instability != null) {
      throw new InvalidIdempotencyKeyException(
          "the key '"
              + keySource
              + "' of listener "
              + name
              + " is "
              + instability
              + "; nothing ran. Pick a field that identifies the event (#event.orderId), or give"
              + " its class a toString() of its identifying values (a record has one)");
    }
    return namespaced(value.toString(), "the key '" + keySource + "'");
  }

  private String fromHeader(Map<String, Object> headers) {
    Object value = Messages.header(headers, header);
    if (value == null || value.toString().isBlank()) {
      throw new MissingIdempotencyKeyException(
          "the message has no "
              + header
              + " header, which carries the key of listener "
              + name
              + "; nothing ran. Set it on the producer, or give the listener a key expression");
    }
    return namespaced(value.toString(), "the " + header + " header");
  }

  /** The guard's key: the listener's name, then {@code value}; a poison message if unusable. */
  private String namespaced(String value, String source) {
    if (value.isBlank()) {
      throw new InvalidIdempotencyKeyException(
          source + " of listener " + name + " is blank; nothing ran");
    }
    try {
      return IdempotencyKey.of(name, value);
    } catch (IllegalArgumentException e) {
      throw new InvalidIdempotencyKeyException(
          source
              + " of listener "
              + name
              + " cannot be a key once namespaced by the listener's name ("
              + e.getMessage()
              + "); nothing ran",
          e);
    }
  }
}
