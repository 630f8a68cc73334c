package dev.idempotency.spring;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Runs the annotated method of a Spring bean at most once per key within a window: a repeat with
 * the same key returns the stored result, of the method's declared (generic) return type, without
 * running the method again.
 *
 * <pre>{@code
 * @Idempotent(name = "order-shipped-email", key = "#event.orderId", ttl = "PT72H")
 * public Receipt sendShippedEmail(OrderShipped event) { ... }
 * }</pre>
 *
 * <ul>
 *   <li>{@link #key()} is a SpEL expression over the method's parameters ({@code #orderId}, {@code
 *       #event.id}, {@code #p0}); its value's {@code toString()} is the key, so it must be stable
 *       across retries. A wrong expression, or one naming no parameter, fails the application at
 *       startup. Parameter names need the {@code -parameters} compiler flag (Spring Boot's build
 *       plugins set it); {@code #p0}, {@code #p1}, ... always work.
 *   <li>{@link #name()} namespaces the key, so two methods with the same argument never share a
 *       record, and names the operation in events and metrics. Default: the class's simple name and
 *       the method's, {@code Mailer.send}.
 *   <li>{@link #ttl()} is the window, an ISO-8601 duration; default {@code
 *       idempotency.default-ttl}.
 * </ul>
 *
 * <p>Results are stored with the application's JSON mapper, so {@code List<Receipt>} and {@code
 * Optional<Receipt>} come back as such; {@code void} and {@code null} work. A method returning
 * {@link java.util.concurrent.CompletionStage} or {@link java.util.concurrent.CompletableFuture}
 * runs through {@link dev.idempotency.IdempotencyGuard#executeForOutcomeAsync}, the stored value
 * being what the stage completes with. A method that throws is released (a retry runs it again) and
 * its exception reaches the caller unchanged, checked or not.
 *
 * <p><b>Self-invocation.</b> As with {@code @Transactional}, the annotation works through a Spring
 * AOP proxy: a call from another bean goes through the guard, a call of the method from inside its
 * own class ({@code this.send(..)}) does not. No AspectJ weaver is needed.
 */
@Target(ElementType.METHOD)
@Retention(RetentionPolicy.RUNTIME)
@Documented
public @interface Idempotent {

  /**
   * The key, a SpEL expression over the method's parameters.
   *
   * @return the expression
   */
  String key();

  /**
   * The namespace of the key and the operation's name in events and metrics; default the class's
   * simple name and the method's name, {@code Mailer.send}.
   *
   * @return the name, or empty for the default
   */
  String name() default "";

  /**
   * The window, an ISO-8601 duration such as {@code PT24H}; default {@code
   * idempotency.default-ttl}.
   *
   * @return the ttl, or empty for the default
   */
  String ttl() default "";
}
