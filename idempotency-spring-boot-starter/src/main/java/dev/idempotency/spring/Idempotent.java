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
 *       across retries (a value whose class keeps {@code Object}'s {@code toString()} is refused at
 *       the call). Parameter names need the {@code -parameters} compiler flag (Spring Boot's build
 *       plugins set it); {@code #p0}, {@code #p1}, ... always work.
 *   <li>{@link #name()} namespaces the key, so two methods with the same argument never share a
 *       record, and names the operation in events and metrics. Default: the class's simple name and
 *       the method's, {@code Mailer.send}; two different methods with the same default name (the
 *       same simple class name in two packages, or overloads) fail the application at startup,
 *       naming both. The default is not the fully qualified name so that moving a class to another
 *       package does not change its keys (a repeat after the deploy would send again).
 *   <li>{@link #ttl()} is the window, in Spring Boot's duration formats ({@code PT72H}, {@code
 *       72h}); default {@code idempotency.default-ttl}. It must be longer than the lease.
 *   <li>{@link #fingerprint()} (optional) is a SpEL expression for what the call is about: a repeat
 *       of the key whose fingerprint differs is refused with {@link
 *       dev.idempotency.IdempotencyKeyReuseException} instead of replaying another call's result.
 * </ul>
 *
 * <p>Mistakes that can be seen at startup fail the application at startup, when its bean is
 * proxied: an expression that does not parse or names no parameter, a ttl that is not a duration or
 * not longer than {@code idempotency.lease}, a name that is not an operation name, two methods with
 * one default name, more than one {@link dev.idempotency.SendContext} parameter.
 *
 * <p>A {@link dev.idempotency.SendContext} parameter is given the call's context (its provider key
 * for the provider's own idempotency header), whatever the caller passed (pass {@code null}).
 *
 * <p>Results are stored with the application's JSON mapper, so {@code List<Receipt>} and {@code
 * Optional<Receipt>} come back as such; {@code void} and {@code null} work. A method returning
 * {@link java.util.concurrent.CompletionStage} or {@link java.util.concurrent.CompletableFuture}
 * runs on the caller's thread, as it would unguarded, so its body sees the caller's thread-locals
 * (security context, MDC, request attributes); the stored value is what its stage completes with. A
 * method returning a Reactor {@code Mono<T>} runs when the {@code Mono} is subscribed, at most once
 * per key however often it is subscribed (a later subscription replays the stored {@code T}), with
 * the subscriber's Reactor context, without blocking the subscribing thread; a {@code Flux} fails
 * the start. A method that throws is released (a retry runs it again) and its exception reaches the
 * caller unchanged, checked or not.
 *
 * <p><b>Transactions.</b> On a method that is also {@code @Transactional}, the guard runs outside
 * the transaction (see {@link IdempotentMethodAdvisor#DEFAULT_ORDER}): the outcome is recorded
 * after the commit, and a commit that fails releases the key, so a retry runs the method again
 * instead of replaying a result that was rolled back.
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
   * The window, in Spring Boot's duration formats ({@code PT72H}, {@code 72h}); default {@code
   * idempotency.default-ttl}.
   *
   * @return the ttl, or empty for the default
   */
  String ttl() default "";

  /**
   * What the call is about, a SpEL expression over the method's parameters ({@code #event}, {@code
   * #message.text + #message.phone}); its value is written as JSON with the application's mapper
   * and compared by its canonical form. A repeat of the key with another value is refused with
   * {@link dev.idempotency.IdempotencyKeyReuseException}. Default: none, a repeat replays whatever
   * its arguments.
   *
   * @return the expression, or empty for none
   */
  String fingerprint() default "";

  /**
   * Whether the guarded call joins the Spring-managed transaction that is active when it runs (SPEC
   * section 17): the key's record, what the method writes through the store's {@code DataSource}
   * ({@code JdbcTemplate}, JPA) and the outcome then commit or roll back together, so a rolled-back
   * call leaves no record and its retry runs again, and a committed one is replayed. The method
   * must be called inside a transaction (the caller's {@code @Transactional} or a {@code
   * TransactionTemplate}) that holds the store's {@code DataSource} (a transaction manager's, not a
   * connection Spring bound for a {@code JdbcTemplate} read under another transaction manager's
   * transaction, which nothing would commit); a call without one fails with an {@link
   * IllegalStateException} naming the method, and never runs in the usual mode instead. Refused at
   * startup on a store that is not a {@code JdbcKeyStore} on a {@code DataSource}, on a method
   * returning a {@code CompletionStage} or a {@code Mono}, and on a method that is itself
   * {@code @Transactional} (its own transaction would begin inside the guard: call it from inside a
   * transaction instead), and in an application without spring-jdbc on its class path (optional in
   * the starter; {@code spring-boot-starter-jdbc} brings it). Default {@code false}: the usual
   * mode, outside the transaction.
   *
   * @return {@code true} to join the caller's transaction
   */
  boolean joinTransaction() default false;
}
