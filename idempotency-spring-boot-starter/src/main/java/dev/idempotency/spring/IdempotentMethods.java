package dev.idempotency.spring;

import dev.idempotency.ResultCodec;
import java.lang.reflect.Method;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;
import org.springframework.aop.support.AopUtils;
import org.springframework.context.expression.AnnotatedElementKey;
import org.springframework.core.DefaultParameterNameDiscoverer;
import org.springframework.core.ParameterNameDiscoverer;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.expression.spel.standard.SpelExpressionParser;

/** Finds, checks and remembers the {@link Idempotent} methods of the application's beans. */
final class IdempotentMethods {

  private static final Optional<IdempotentMethod> NONE = Optional.empty();

  private final Map<AnnotatedElementKey, Optional<IdempotentMethod>> methods =
      new ConcurrentHashMap<>();
  private final Map<IdempotentMethod, ResultCodec<Object>> codecs = new ConcurrentHashMap<>();
  private final SpelExpressionParser parser = new SpelExpressionParser();
  private final ParameterNameDiscoverer parameterNames = new DefaultParameterNameDiscoverer();

  /**
   * The annotated method a call of {@code method} on {@code targetClass} runs, or {@code null}.
   *
   * @throws IllegalStateException if the annotation is wrong (at startup, when beans are proxied)
   */
  IdempotentMethod find(Method method, Class<?> targetClass) {
    return methods
        .computeIfAbsent(
            new AnnotatedElementKey(method, targetClass), key -> lookUp(method, targetClass))
        .orElse(null);
  }

  private Optional<IdempotentMethod> lookUp(Method method, Class<?> targetClass) {
    Method specific = AopUtils.getMostSpecificMethod(method, targetClass);
    Idempotent annotation = AnnotatedElementUtils.findMergedAnnotation(specific, Idempotent.class);
    if (annotation == null) {
      return NONE;
    }
    return Optional.of(
        IdempotentMethod.of(specific, targetClass, annotation, parser, parameterNames));
  }

  /** The codec of a method's result type, from the application's JSON mapper, made once. */
  ResultCodec<Object> codec(IdempotentMethod method, Supplier<JsonCodecs> json) {
    return codecs.computeIfAbsent(method, m -> json.get().codecFor(m.resultType));
  }
}
