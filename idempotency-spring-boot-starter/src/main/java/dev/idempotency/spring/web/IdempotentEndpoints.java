package dev.idempotency.spring.web;

import dev.idempotency.IdempotencyKey;
import dev.idempotency.SendContext;
import dev.idempotency.spring.TtlAttribute;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;
import org.springframework.aop.framework.Advised;
import org.springframework.aop.support.AopUtils;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.BeanFactoryAware;
import org.springframework.beans.factory.ListableBeanFactory;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.core.ReactiveAdapterRegistry;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.util.ClassUtils;
import org.springframework.web.context.request.async.DeferredResult;
import org.springframework.web.method.HandlerMethod;
import org.springframework.web.servlet.mvc.method.annotation.RequestMappingHandlerMapping;

/**
 * The application's {@link IdempotentEndpoint} handler methods: each annotation read and checked
 * once, and all of them checked when the application has started (every singleton created), so that
 * a mistake fails the start instead of a request: a ttl that is not a duration or not longer than
 * the lease, a name that is not an operation name, {@code Set-Cookie} among the headers, a handler
 * that Spring AOP cannot advise (so the start of the handler could not be seen), a {@link
 * SendContext} parameter on a handler without the annotation. The Spring Boot auto-configuration
 * registers it. Thread-safe.
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
      throw new IllegalStateException(
          where + ": the name '" + name + "' must be 1 to 64 characters of [A-Za-z0-9_.-]");
    }
    List<String> headers = new ArrayList<>();
    for (String header : annotation.headers()) {
      if (header.isBlank() || "Set-Cookie".equalsIgnoreCase(header.strip())) {
        throw new IllegalStateException(
            where
                + ": headers must name response headers to replay, never Set-Cookie (a replay"
                + " must not hand one client's cookie to another), was '"
                + header
                + "'");
      }
      headers.add(header.strip());
    }
    Duration ttl = TtlAttribute.parse(where, annotation.ttl(), name, ttlOf, lease.get());
    return Optional.of(
        new Endpoint(where, name, ttl, annotation.required(), List.copyOf(headers), method));
  }

  /** Checks every handler method of the application's request mappings, MVC and WebFlux. */
  @Override
  public void afterSingletonsInstantiated() {
    if (beanFactory == null) {
      return;
    }
    ClassLoader loader = getClass().getClassLoader();
    if (org.springframework.util.ClassUtils.isPresent(
        "org.springframework.web.servlet.DispatcherServlet", loader)) {
      for (RequestMappingHandlerMapping mapping :
          beanFactory.getBeansOfType(RequestMappingHandlerMapping.class, false, false).values()) {
        for (HandlerMethod handler : mapping.getHandlerMethods().values()) {
          check(handler, IdempotentEndpointAdvisor.class);
        }
      }
    }
    if (org.springframework.util.ClassUtils.isPresent(
        "org.springframework.web.reactive.DispatcherHandler", loader)) {
      checkWebFlux(beanFactory);
    }
  }

  /** A WebFlux handler's response is stored only if the handler was seen invoked. */
  private void checkWebFlux(ListableBeanFactory beans) {
    for (var mapping :
        beans
            .getBeansOfType(
                org.springframework.web.reactive.result.method.annotation
                    .RequestMappingHandlerMapping.class,
                false,
                false)
            .values()) {
      for (HandlerMethod handler : mapping.getHandlerMethods().values()) {
        check(handler, IdempotentEndpointInvocations.class);
      }
    }
  }

  private void check(HandlerMethod handler, Class<?> advisorType) {
    boolean mvc = advisorType == IdempotentEndpointAdvisor.class;
    Endpoint endpoint = find(handler);
    Method method = handler.getMethod();
    if (endpoint == null) {
      if (Arrays.asList(method.getParameterTypes()).contains(SendContext.class)) {
        throw new IllegalStateException(
            describe(method)
                + " takes a SendContext, which only @IdempotentEndpoint handlers get; annotate it"
                + " or remove the parameter");
      }
      return;
    }
    Class<?> returned = method.getReturnType();
    if (mvc
        && !CompletionStage.class.isAssignableFrom(returned)
        && ReactiveAdapterRegistry.getSharedInstance().getAdapter(returned) != null) {
      throw new IllegalStateException(
          endpoint.where()
              + " returns "
              + returned.getName()
              + ", which a Spring MVC endpoint does not support: at a container timeout its key"
              + " would be released while its send runs, and a retry would send again; return a"
              + " CompletableFuture (mono.toFuture()), or serve it from Spring WebFlux");
    }
    if (mvc
        && DeferredResult.class.isAssignableFrom(returned)
        && returned != DeferredResult.class) {
      throw new IllegalStateException(
          endpoint.where()
              + " returns "
              + returned.getName()
              + ", a subclass of DeferredResult, which is not supported: at a container timeout"
              + " its key would be released while its send runs; return DeferredResult itself");
    }
    if (Modifier.isFinal(method.getModifiers()) || Modifier.isPrivate(method.getModifiers())) {
      throw new IllegalStateException(
          endpoint.where()
              + ": the method is "
              + (Modifier.isPrivate(method.getModifiers()) ? "private" : "final")
              + ", so Spring AOP cannot see the handler start, and the response could never be"
              + " stored; make it public and not final");
    }
    Object bean = handler.getBean();
    if (bean instanceof String beanName) {
      if (beanFactory == null || !beanFactory.isSingleton(beanName)) {
        return; // created per request or scope: checked when it is
      }
      bean = beanFactory.getBean(beanName);
    }
    boolean advised =
        AopUtils.isAopProxy(bean)
            && bean instanceof Advised proxy
            && Arrays.stream(proxy.getAdvisors()).anyMatch(advisorType::isInstance);
    if (!advised) {
      throw new IllegalStateException(
          endpoint.where()
              + ": its bean is not advised by the "
              + advisorType.getSimpleName()
              + " (is its class final,"
              + " or the auto-proxy creator off?), so the handler start cannot be seen and the"
              + " response could never be stored");
    }
  }

  private static String describe(Method method) {
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
