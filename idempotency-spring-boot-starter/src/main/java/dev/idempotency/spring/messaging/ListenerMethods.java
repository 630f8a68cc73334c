package dev.idempotency.spring.messaging;

import dev.idempotency.spring.DefaultOperationNames;
import dev.idempotency.spring.ExpressionAttributes;
import dev.idempotency.spring.IdempotencyConfigurationException;
import dev.idempotency.spring.Idempotent;
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
 * Finds, checks and remembers the {@link IdempotentListener} methods of the application's beans.
 * Two different listeners with one default name, or two beans of one class with a default-named
 * listener, are refused while the application starts: they would share one key namespace.
 */
final class ListenerMethods {

  private final Map<AnnotatedElementKey, Optional<ListenerMethod>> methods =
      new ConcurrentHashMap<>();
  private final SpelExpressionParser parser = ExpressionAttributes.parser();
  private final ParameterNameDiscoverer parameterNames = new DefaultParameterNameDiscoverer();
  private final Supplier<String> defaultHeader;
  private final Supplier<Boolean> acknowledgeStoredFailure;
  private final Function<@Nullable String, Duration> ttlOf;
  private final Supplier<@Nullable Duration> lease;
  private static final String ANNOTATION = "@IdempotentListener";
  private static final String CONSEQUENCE =
      "a delivery to one could be acknowledged as a replay of the other's without being sent";
  private volatile DefaultOperationNames defaultNames =
      new DefaultOperationNames(ANNOTATION, CONSEQUENCE);

  /**
   * @param ttlOf the window of listeners that name none, by operation name, asked as listeners are
   *     found
   * @param lease the guard's lease, which every window must be longer than; may supply null (not
   *     checked)
   */
  ListenerMethods(
      Supplier<String> defaultHeader,
      Supplier<Boolean> acknowledgeStoredFailure,
      Function<@Nullable String, Duration> ttlOf,
      Supplier<@Nullable Duration> lease) {
    this.defaultHeader = defaultHeader;
    this.acknowledgeStoredFailure = acknowledgeStoredFailure;
    this.ttlOf = ttlOf;
    this.lease = lease;
  }

  /**
   * Registers default names in the application's registry, which {@code @Idempotent} methods share:
   * called before any listener is found.
   */
  void shareDefaultNames(DefaultOperationNames shared) {
    defaultNames = shared.forAnnotation(ANNOTATION, CONSEQUENCE);
  }

  /**
   * The annotated method a call of {@code method} on {@code targetClass} runs, or {@code null}.
   *
   * @throws IllegalStateException if the annotation is wrong (at startup, when beans are proxied)
   */
  ListenerMethod find(Method method, Class<?> targetClass) {
    AnnotatedElementKey key = new AnnotatedElementKey(method, targetClass);
    Optional<ListenerMethod> found = methods.get(key);
    if (found == null) {
      // not computeIfAbsent: working out a method may create beans, which are matched in turn
      found = lookUp(method, targetClass);
      Optional<ListenerMethod> raced = methods.putIfAbsent(key, found);
      if (raced != null) {
        found = raced;
      }
    }
    return found.orElse(null);
  }

  private Optional<ListenerMethod> lookUp(Method method, Class<?> targetClass) {
    Method specific = AopUtils.getMostSpecificMethod(method, targetClass);
    IdempotentListener annotation =
        AnnotatedElementUtils.findMergedAnnotation(specific, IdempotentListener.class);
    if (annotation == null) {
      return Optional.empty();
    }
    if (AnnotatedElementUtils.hasAnnotation(specific, Idempotent.class)) {
      throw new IdempotencyConfigurationException(
          "@IdempotentListener and @Idempotent on "
              + targetClass.getName()
              + "."
              + method.getName()
              + "(..): the delivery would be guarded twice.",
          "Keep @IdempotentListener, which also tells the broker what to do with each"
              + " delivery.");
    }
    ListenerMethod found =
        ListenerMethod.of(
            specific,
            targetClass,
            annotation,
            defaultHeader.get(),
            acknowledgeStoredFailure.get(),
            parser,
            parameterNames,
            ttlOf,
            lease.get());
    if (found.defaultName) {
      defaultNames.register(found.name, found.method, found.userClass);
    }
    return Optional.of(found);
  }

  /**
   * Registers the bean being proxied, a bean of {@code targetClass}: a second bean of a class with
   * a default-named listener is refused ({@link DefaultOperationNames#registerBean}).
   *
   * @param beanName the bean's name, or null when no bean is being proxied
   * @throws IllegalStateException naming both beans
   */
  void registerBean(@Nullable String beanName, Class<?> targetClass) {
    defaultNames.registerBean(
        beanName,
        ClassUtils.getUserClass(targetClass),
        method -> {
          ListenerMethod found = find(method, targetClass);
          return found != null && found.defaultName;
        });
  }

  /** Whether any annotated listener was found so far. */
  boolean anyFound() {
    return methods.values().stream().anyMatch(Optional::isPresent);
  }
}
