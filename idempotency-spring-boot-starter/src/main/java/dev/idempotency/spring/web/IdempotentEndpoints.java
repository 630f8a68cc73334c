package dev.idempotency.spring.web;

import dev.idempotency.IdempotencyKey;
import dev.idempotency.SendContext;
import dev.idempotency.spring.IdempotencyConfigurationException;
import dev.idempotency.spring.TtlAttribute;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.BeanFactoryAware;
import org.springframework.beans.factory.ListableBeanFactory;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.util.ClassUtils;
import org.springframework.web.method.HandlerMethod;

/**
 * The application's {@link IdempotentEndpoint} handler methods: each annotation read and checked
 * once, and all of them checked when the application has started (every singleton created), so that
 * a mistake fails the start instead of a request, on Spring MVC and on Spring WebFlux: a ttl that
 * is not a duration or not longer than the lease, a name that is not an operation name, {@code
 * Set-Cookie} among the headers, a {@link SendContext} parameter on a handler without the
 * annotation; on Spring MVC also a handler that Spring AOP cannot advise (so the start of the
 * handler could not be seen) and a return type the MVC endpoint cannot guard ({@link
 * EndpointStartupChecks}). The Spring Boot auto-configuration registers it. Thread-safe.
 */
public final class IdempotentEndpoints implements SmartInitializingSingleton, BeanFactoryAware {

  /**
   * An annotated handler method, as the interceptor runs it.
   *
   * @param where the method, for messages
   * @param name the operation's name, or {@code null} for the default of the path pattern
   * @param ttl the window
   * @param required whether the key is required
   * @param headers the response headers to store besides Content-Type and Location
   * @param method the handler method
   */
  record Endpoint(
      String where,
      @Nullable String name,
      Duration ttl,
      boolean required,
      List<String> headers,
      Method method) {}

  private final Map<Method, Optional<Endpoint>> endpoints = new ConcurrentHashMap<>();
  private final Function<@Nullable String, Duration> ttlOf;
  private final Supplier<@Nullable Duration> lease;
  private @Nullable ListableBeanFactory beanFactory;

  /**
   * Creates the registry.
   *
   * @param defaultTtl the window of endpoints that name none ({@code idempotency.default-ttl})
   * @param lease the guard's lease, which every window must be longer than; may supply null to skip
   *     that check
   */
  public IdempotentEndpoints(Supplier<Duration> defaultTtl, Supplier<@Nullable Duration> lease) {
    this(dev.idempotency.spring.TtlAttribute.sameForAll(defaultTtl), lease);
  }

  /**
   * Creates the registry, with windows by operation.
   *
   * @param ttlOf the window of endpoints that name none, by operation name ({@code
   *     idempotency.operations.<name>.ttl}, else {@code idempotency.default-ttl}); {@code null} for
   *     an endpoint without a name
   * @param lease the guard's lease, which every window must be longer than; may supply null to skip
   *     that check
   */
  public IdempotentEndpoints(
      Function<@Nullable String, Duration> ttlOf, Supplier<@Nullable Duration> lease) {
    this.ttlOf = Objects.requireNonNull(ttlOf, "ttlOf must not be null");
    this.lease = Objects.requireNonNull(lease, "lease must not be null");
  }

  @Override
  public void setBeanFactory(BeanFactory beanFactory) {
    this.beanFactory = beanFactory instanceof ListableBeanFactory listable ? listable : null;
  }

  /**
   * The endpoint a handler method is, or {@code null} if it is not annotated.
   *
   * @throws IllegalStateException naming the method and the mistake in its annotation
   */
  @Nullable Endpoint find(HandlerMethod handler) {
    return endpoints.computeIfAbsent(handler.getMethod(), this::read).orElse(null);
  }

  private Optional<Endpoint> read(Method method) {
    IdempotentEndpoint annotation =
        AnnotatedElementUtils.findMergedAnnotation(method, IdempotentEndpoint.class);
    if (annotation == null) {
      return Optional.empty();
    }
    String where = "@IdempotentEndpoint on " + describe(method);
    String name = annotation.name().isEmpty() ? null : annotation.name();
    if (name != null && !IdempotencyKey.isOperationName(name)) {
      throw new IdempotencyConfigurationException(
          where + ": the name '" + name + "' must be 1 to 64 characters of [A-Za-z0-9_.-].",
          "Set name = \"...\" to such a name, or leave it out for the default.");
    }
    List<String> headers = new ArrayList<>();
    for (String header : annotation.headers()) {
      if (header.isBlank() || "Set-Cookie".equalsIgnoreCase(header.strip())) {
        throw new IdempotencyConfigurationException(
            where
                + ": headers must name response headers to replay, never Set-Cookie (a replay"
                + " must not hand one client's cookie to another), was '"
                + header
                + "'.",
            "Remove it from headers; name only response headers that are the same for every"
                + " client.");
      }
      headers.add(header.strip());
    }
    Duration ttl = TtlAttribute.parse(where, annotation.ttl(), name, ttlOf, lease.get());
    return Optional.of(
        new Endpoint(where, name, ttl, annotation.required(), List.copyOf(headers), method));
  }

  /**
   * Checks every handler method of the application's request mappings, Spring MVC's and Spring
   * WebFlux's alike ({@link EndpointStartupChecks} says which checks apply to which stack, and
   * why).
   *
   * @throws IllegalStateException naming the first handler method found wrong, and its mistake
   */
  @Override
  public void afterSingletonsInstantiated() {
    if (beanFactory != null) {
      new EndpointStartupChecks(this, beanFactory).checkAll();
    }
  }

  static String describe(Method method) {
    StringBuilder text =
        new StringBuilder(ClassUtils.getUserClass(method.getDeclaringClass()).getName())
            .append('.')
            .append(method.getName())
            .append('(');
    Class<?>[] types = method.getParameterTypes();
    for (int i = 0; i < types.length; i++) {
      text.append(i > 0 ? ", " : "").append(types[i].getSimpleName());
    }
    return text.append(')').toString();
  }
}
