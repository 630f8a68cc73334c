package dev.idempotency.spring;

import dev.idempotency.ResultCodec;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;
import org.springframework.aop.support.AopUtils;
import org.springframework.context.expression.AnnotatedElementKey;
import org.springframework.core.DefaultParameterNameDiscoverer;
import org.springframework.core.ParameterNameDiscoverer;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.expression.spel.standard.SpelExpressionParser;
import org.springframework.util.ClassUtils;

/**
 * Finds, checks and remembers the {@link Idempotent} methods of the application's beans. Two
 * different methods whose default names are equal (the same simple class name in two packages, or
 * overloads), or two beans of one class with a default-named method, are refused when the second is
 * found, that is while the application starts: they would share one key namespace.
 */
final class IdempotentMethods {

  private static final Optional<IdempotentMethod> NONE = Optional.empty();

  private final Map<AnnotatedElementKey, Optional<IdempotentMethod>> methods =
      new ConcurrentHashMap<>();
  private static final String ANNOTATION = "@Idempotent";
  private static final String CONSEQUENCE = "one could return the other's result";
  private volatile DefaultOperationNames defaultNames =
      new DefaultOperationNames(ANNOTATION, CONSEQUENCE);
  private final Map<IdempotentMethod, ResultCodec<Object>> codecs = new ConcurrentHashMap<>();
  private final SpelExpressionParser parser = ExpressionAttributes.parser();
  private final ParameterNameDiscoverer parameterNames = new DefaultParameterNameDiscoverer();
  private final Function<@Nullable String, Duration> ttlOf;
  private final Supplier<@Nullable Duration> lease;

  /**
   * @param ttlOf the window of methods that name none, by operation name, asked as methods are
   *     found
   * @param lease the guard's lease, which every window must be longer than; may supply null (not
   *     checked)
   */
  IdempotentMethods(
      Function<@Nullable String, Duration> ttlOf, Supplier<@Nullable Duration> lease) {
    this.ttlOf = ttlOf;
    this.lease = lease;
  }

  /**
   * Registers default names in the application's registry, which {@code @IdempotentListener}
   * methods share: called before any method is found.
   */
  void shareDefaultNames(DefaultOperationNames shared) {
    defaultNames = shared.forAnnotation(ANNOTATION, CONSEQUENCE);
  }

  /**
   * The annotated method a call of {@code method} on {@code targetClass} runs, or {@code null}.
   *
   * @throws IllegalStateException if the annotation is wrong (at startup, when beans are proxied)
   */
  @Nullable IdempotentMethod find(Method method, Class<?> targetClass) {
    AnnotatedElementKey key = new AnnotatedElementKey(method, targetClass);
    Optional<IdempotentMethod> found = methods.get(key);
    if (found == null) {
      // not computeIfAbsent: looking up the settings may create beans, which are matched too
      found = lookUp(method, targetClass);
      Optional<IdempotentMethod> raced = methods.putIfAbsent(key, found);
      if (raced != null) {
        found = raced;
      }
    }
    return found.orElse(null);
  }

  private Optional<IdempotentMethod> lookUp(Method method, Class<?> targetClass) {
    Method specific = AopUtils.getMostSpecificMethod(method, targetClass);
    Idempotent annotation = AnnotatedElementUtils.findMergedAnnotation(specific, Idempotent.class);
    if (annotation == null) {
      return NONE;
    }
    IdempotentMethod found =
        IdempotentMethod.of(
            specific, targetClass, annotation, parser, parameterNames, ttlOf, lease.get());
    if (found.defaultName) {
      defaultNames.register(found.name, found.method, found.userClass);
    }
    return Optional.of(found);
  }

  /**
   * Registers the bean being proxied, a bean of {@code targetClass}: a second bean of a class with
   * a default-named method is refused ({@link DefaultOperationNames#registerBean}).
   *
   * @param beanName the bean's name, or null when no bean is being proxied
   * @throws IllegalStateException naming both beans
   */
  void registerBean(@Nullable String beanName, Class<?> targetClass) {
    defaultNames.registerBean(
        beanName,
        ClassUtils.getUserClass(targetClass),
        method -> {
          IdempotentMethod found = find(method, targetClass);
          return found != null && found.defaultName;
        });
  }

  /** The methods found so far that join the caller's transaction. */
  java.util.List<IdempotentMethod> joining() {
    return methods.values().stream()
        .flatMap(Optional::stream)
        .filter(m -> m.joinTransaction)
        .distinct()
        .toList();
  }

  /** Whether any annotated method was found so far. */
  boolean anyFound() {
    return methods.values().stream().anyMatch(Optional::isPresent);
  }

  /** The codec of a method's result type, from the application's JSON mapper, made once. */
  ResultCodec<Object> codec(IdempotentMethod method, Supplier<JsonCodecs> json) {
    if (method.resultType == Void.class) {
      return NOTHING; // no JSON mapper needed for a method that returns nothing
    }
    return codecs.computeIfAbsent(method, m -> json.get().codecFor(m.resultType));
  }

  /** The codec of {@code void}: the guard stores a null result without it, so it never runs. */
  private static final ResultCodec<Object> NOTHING =
      new ResultCodec<>() {
        @Override
        public byte[] encode(Object value) {
          throw new IllegalStateException("a void method has no result to encode");
        }

        @Override
        public Object decode(byte[] bytes) {
          throw new IllegalStateException("a void method has no result to decode");
        }
      };
}
