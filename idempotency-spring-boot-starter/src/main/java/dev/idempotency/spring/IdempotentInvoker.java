package dev.idempotency.spring;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.Outcome;
import dev.idempotency.ResultCodec;
import dev.idempotency.SendContext;
import dev.idempotency.SendFailedException;
import dev.idempotency.Sender;
import dev.idempotency.spring.messaging.OutcomesAfterCommit;
import java.lang.reflect.UndeclaredThrowableException;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Supplier;
import org.aopalliance.intercept.MethodInvocation;
import org.jspecify.annotations.Nullable;
import org.springframework.aop.support.AopUtils;
import org.springframework.util.ClassUtils;

/**
 * Runs one call of an {@link Idempotent} method through the guard once its key is known: the method
 * at most once per key, a repeat answered with the stored result of the method's declared type, a
 * failure released and rethrown as the method threw it. {@link IdempotentMethodInterceptor} takes
 * the key from the annotation's SpEL expression; an integration that knows the key otherwise (a
 * message header) calls {@link #invoke} itself, with the invoker of {@link
 * IdempotentMethodAdvisor#invoker()}.
 *
 * <ul>
 *   <li>A method returning a value (or {@code void}) runs on the calling thread inside {@link
 *       IdempotencyGuard#executeForOutcome}; a listener method (Spring Kafka, JMS, Spring AMQP: a
 *       listener annotation, or an endpoint's method the application registered itself) in a
 *       listener container's transaction has its outcome recorded after that transaction committed,
 *       and released if it did not ({@link OutcomesAfterCommit}). A method merely called from a
 *       listener records when it returns.
 *   <li>A method returning a {@code CompletionStage} runs on the calling thread too (a {@link
 *       PendingCall}): the caller waits for the claim as for any guarded call, the body sees the
 *       caller's thread-locals (security context, MDC, request attributes, transaction), and the
 *       stage it returns completes the call; the returned stage completes once the outcome is
 *       recorded.
 *   <li>A method returning a {@code Mono} runs when the {@code Mono} is subscribed, through the
 *       guard's non-blocking call, once per key however often it is subscribed ({@link MonoCalls}).
 *   <li>A {@link SendContext} parameter is given the call's context, whatever the caller passed.
 * </ul>
 *
 * <p>Thread-safe.
 */
public final class IdempotentInvoker {

  private final IdempotentMethods methods;
  private final Supplier<IdempotencyGuard> guard;
  private final Supplier<JsonCodecs> json;
  private final Supplier<Duration> maxClaimWait;

  IdempotentInvoker(
      IdempotentMethods methods,
      Supplier<IdempotencyGuard> guard,
      Supplier<JsonCodecs> json,
      Supplier<Duration> maxClaimWait) {
    this.methods = methods;
    this.guard = guard;
    this.json = json;
    this.maxClaimWait = maxClaimWait;
  }

  /**
   * The {@link Idempotent} method an invocation runs, worked out and checked once.
   *
   * @param invocation the intercepted call
   * @return the method, or {@code null} if it is not annotated
   */
  @Nullable IdempotentMethod methodOf(MethodInvocation invocation) {
    Object target = invocation.getThis();
    Class<?> targetClass =
        target != null
            ? AopUtils.getTargetClass(target)
            : invocation.getMethod().getDeclaringClass();
    return methods.find(invocation.getMethod(), targetClass);
  }

  /**
   * Refuses at startup the {@link Idempotent#joinTransaction()} methods found so far when the
   * guard's store cannot join a Spring transaction, or spring-jdbc is missing.
   *
   * @param classLoader the application's class loader, where spring-jdbc must be found
   * @throws IllegalStateException naming the first such method and the store or the dependency
   */
  void requireJoinableStore(@Nullable ClassLoader classLoader) {
    for (IdempotentMethod method : methods.joining()) {
      requireSpringJdbc(method, classLoader);
      JoinedCalls.requireJoinableStore(method, guard.get().store());
    }
  }

  /**
   * Refuses a joining method when spring-jdbc (optional in the starter) or spring-tx is missing,
   * before {@link JoinedCalls}, which needs them, is loaded.
   */
  private static void requireSpringJdbc(IdempotentMethod method, @Nullable ClassLoader loader) {
    for (String required : SPRING_JDBC_CLASSES) {
      if (!ClassUtils.isPresent(required, loader)) {
        throw new IdempotencyConfigurationException(
            method.where()
                + " has joinTransaction = true, but spring-jdbc is not on the classpath ("
                + required
                + " is missing): joining a transaction takes its connection through Spring's"
                + " DataSourceUtils.",
            "Add the dependency org.springframework:spring-jdbc (Spring"
                + " Boot's spring-boot-starter-jdbc brings it), or remove joinTransaction.");
      }
    }
  }

  /** What {@link JoinedCalls} uses of spring-jdbc and spring-tx. */
  private static final String[] SPRING_JDBC_CLASSES = {
    "org.springframework.jdbc.datasource.DataSourceUtils",
    "org.springframework.transaction.support.TransactionSynchronizationManager"
  };

  /**
   * Whether an invocation is of an {@link Idempotent} method.
   *
   * @param invocation the intercepted call
   * @return {@code true} if {@link #invoke} can run it
   */
  public boolean isIdempotent(MethodInvocation invocation) {
    return methodOf(invocation) != null;
  }

  /**
   * Runs an invocation of an {@link Idempotent} method under a key.
   *
   * @param invocation the intercepted call
   * @param key the key within the method's namespace (its {@link Idempotent#name()}, added here)
   * @param fingerprint what identifies the call's content, or {@code null} for none; a repeat of
   *     the key with another fingerprint is an {@link dev.idempotency.IdempotencyKeyReuseException}
   * @return the method's result, or the stored one on a repeat
   * @throws Throwable what the method threw, unchanged, or the guard's exceptions
   * @throws IllegalArgumentException if the invocation is not of an {@link Idempotent} method
   * @throws InvalidKeyException if the key is not a valid key
   */
  public @Nullable Object invoke(
      MethodInvocation invocation, String key, @Nullable String fingerprint) throws Throwable {
    IdempotentMethod method = methodOf(invocation);
    if (method == null) {
      throw new IllegalArgumentException(invocation.getMethod() + " is not @Idempotent");
    }
    Objects.requireNonNull(key, "key must not be null");
    String guardKey;
    try {
      guardKey = IdempotencyKey.of(method.name, key);
    } catch (IllegalArgumentException e) {
      throw new InvalidKeyException(
          "the key of " + method.name + " is not a valid key (" + e.getMessage() + "); nothing ran",
          e);
    }
    IdempotencyRequest request =
        IdempotencyRequest.of(guardKey, method.ttl).withOperation(method.name);
    if (fingerprint != null) {
      request = request.withFingerprint(fingerprint);
    }
    ResultCodec<Object> codec = methods.codec(method, json);
    return switch (method.kind) {
      case STAGE -> invokeStage(method, invocation, request, codec);
      case MONO -> MonoCalls.guarded(guard.get(), method, invocation, request, codec);
      case VALUE, VOID -> invokeBlocking(method, invocation, request, codec);
    };
  }

  /** The request fingerprint of {@link Idempotent#fingerprint()}, or {@code null}. */
  @Nullable String fingerprintOf(IdempotentMethod method, MethodInvocation invocation) {
    if (!method.hasFingerprint()) {
      return null;
    }
    return method.fingerprint(invocation.getThis(), invocation.getArguments(), json.get());
  }

  private @Nullable Object invokeBlocking(
      IdempotentMethod method,
      MethodInvocation invocation,
      IdempotencyRequest request,
      ResultCodec<Object> codec)
      throws Throwable {
    Throwable[] thrown = new Throwable[1];
    Sender<Object> body = context -> proceed(method, invocation, context, thrown);
    try {
      Outcome<Object> outcome;
      if (method.joinTransaction) {
        outcome = JoinedCalls.execute(method, guard.get(), request, codec, body);
      } else if (method.listener()) {
        // in a listener container's transaction, recorded after its commit
        outcome =
            OutcomesAfterCommit.executeForOutcome(guard.get(), request, codec, method.name, body);
      } else {
        outcome = guard.get().executeForOutcome(request, codec, body);
      }
      return method.kind == IdempotentMethod.Kind.VOID ? null : outcome.value();
    } catch (SendFailedException e) {
      throw ownFailure(e, thrown);
    }
  }

  private Object invokeStage(
      IdempotentMethod method,
      MethodInvocation invocation,
      IdempotencyRequest request,
      ResultCodec<Object> codec)
      throws Throwable {
    Duration maxWait = maxClaimWait.get();
    PendingCall<Object> call = PendingCall.claim(guard.get(), request, codec, maxWait);
    Throwable[] thrown = new Throwable[1];
    if (call.claimed()) {
      Object returned;
      try (PendingCall.Scope mdc = call.enter()) {
        returned = proceed(method, invocation, call.context(), thrown);
      } catch (Throwable e) {
        // thrown before any stage: the caller gets it as the unguarded method would throw it
        call.fail(thrown[0] != null ? thrown[0] : e);
        awaitQuietly(call.outcome(), maxWait);
        throw thrown[0] != null ? thrown[0] : e;
      }
      CompletionStage<Object> stage = stage(returned);
      stage.whenComplete(
          (value, error) -> {
            if (error == null) {
              call.complete(value);
            } else {
              thrown[0] = PendingCall.unwrap(error);
              call.fail(thrown[0]);
            }
          });
    }
    CompletableFuture<Object> result = new CompletableFuture<>();
    call.outcome()
        .whenComplete(
            (outcome, error) -> {
              if (error == null) {
                result.complete(outcome.value());
              } else {
                result.completeExceptionally(ownFailure(PendingCall.unwrap(error), thrown));
              }
            });
    return result;
  }

  /** Runs the method with the call's context; remembers what it threw. */
  static @Nullable Object proceed(
      IdempotentMethod method, MethodInvocation invocation, SendContext context, Throwable[] thrown)
      throws Exception {
    if (method.sendContextIndex >= 0) {
      invocation.getArguments()[method.sendContextIndex] = context;
    }
    try {
      return invocation.proceed();
    } catch (Exception | Error e) {
      thrown[0] = e;
      throw e;
    } catch (Throwable t) {
      thrown[0] = t;
      throw new UndeclaredThrowableException(t);
    }
  }

  @SuppressWarnings("unchecked")
  private static CompletionStage<Object> stage(@Nullable Object returned) {
    return returned == null
        ? CompletableFuture.completedFuture(null)
        : (CompletionStage<Object>) returned;
  }

  /** The method's own checked exception, not the guard's wrapper of it. */
  static Throwable ownFailure(Throwable error, Throwable[] thrown) {
    if (error instanceof SendFailedException && error.getCause() != null) {
      Throwable cause = error.getCause();
      if (cause == thrown[0] || thrown[0] == null) {
        return cause;
      }
    }
    return error;
  }

  private static void awaitQuietly(CompletableFuture<?> future, Duration maxWait) {
    try {
      future.get(maxWait.toNanos(), TimeUnit.NANOSECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (ExecutionException | TimeoutException e) {
      // the release's own result does not change what the caller gets
    }
  }
}
