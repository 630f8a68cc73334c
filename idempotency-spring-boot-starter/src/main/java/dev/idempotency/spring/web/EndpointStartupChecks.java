package dev.idempotency.spring.web;

import dev.idempotency.SendContext;
import dev.idempotency.spring.IdempotencyConfigurationException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import org.jspecify.annotations.Nullable;
import org.springframework.aop.Advisor;
import org.springframework.aop.framework.Advised;
import org.springframework.aop.support.AopUtils;
import org.springframework.beans.factory.ListableBeanFactory;
import org.springframework.core.ReactiveAdapterRegistry;
import org.springframework.core.ResolvableType;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.http.HttpEntity;
import org.springframework.util.ClassUtils;
import org.springframework.web.context.request.async.DeferredResult;
import org.springframework.web.method.HandlerMethod;

/**
 * The start-time checks of the application's {@link IdempotentEndpoint} handler methods, run by
 * {@link IdempotentEndpoints} once every singleton exists, over the annotated-controller mappings
 * of Spring MVC and of Spring WebFlux. The first mistake found fails the start, naming the handler.
 *
 * <p>On both stacks: the annotation itself (a ttl that is not a duration or not longer than the
 * lease, a name that is not an operation name, {@code Set-Cookie} among the replayed headers), and
 * a {@link SendContext} parameter on a handler without the annotation (nothing would ever give it a
 * context).
 *
 * <p>On both stacks too: a handler that Spring AOP cannot advise (a final or private method, a bean
 * without the stack's advisor). The MVC endpoint sees the handler start through the {@code
 * IdempotentEndpointAdvisor}; the WebFlux endpoint stores a response only if {@code
 * IdempotentEndpointInvocations} saw the handler method invoked, so without that advice no response
 * could ever be stored.
 *
 * <p>On Spring MVC only: a reactive return type ({@code Mono}, {@code Flux}), a subclass of {@code
 * DeferredResult}, or a declared subtype of {@code Callable}: at a servlet container's async
 * timeout such a result's key would be released while its send runs (or, for a {@code Callable}
 * subtype, its work cut off by Spring MVC's interrupt, or kept claimed though it never ran).
 * WebFlux has no container timeout: a reactive type is its own idiom, and {@code DeferredResult} is
 * a Spring MVC type it never runs.
 */
final class EndpointStartupChecks {

  /**
   * Spring Framework 6's {@code ListenableFuture}, gone in 7; null where it is not present. The one
   * lookup of its name, used by {@link IdempotentEndpointAdvisor} too.
   */
  static final @Nullable Class<?> LISTENABLE_FUTURE =
      classOrNull("org.springframework.util.concurrent.ListenableFuture");

  /**
   * Why a Spring MVC endpoint refuses a reactive result, after its type: here for a declared one,
   * and in {@link IdempotentEndpointAdvisor} for a stream returned where {@code Object} is
   * declared.
   */
  static final String UNFOLLOWED_REACTIVE =
      ", which a Spring MVC endpoint does not support: at a container timeout its key would be"
          + " released while its send runs";

  private final IdempotentEndpoints endpoints;
  private final ListableBeanFactory beanFactory;

  EndpointStartupChecks(IdempotentEndpoints endpoints, ListableBeanFactory beanFactory) {
    this.endpoints = endpoints;
    this.beanFactory = beanFactory;
  }

  /** Checks the handler methods of every request mapping of the stacks on the class path. */
  void checkAll() {
    ClassLoader loader = getClass().getClassLoader();
    if (ClassUtils.isPresent("org.springframework.web.servlet.DispatcherServlet", loader)) {
      SpringMvcMappings.handlers(beanFactory).forEach(this::springMvc);
    }
    if (ClassUtils.isPresent("org.springframework.web.reactive.DispatcherHandler", loader)) {
      WebFluxMappings.handlers(beanFactory).forEach(this::webFlux);
    }
  }

  /** A Spring WebFlux handler method: the checks of both stacks. */
  void webFlux(HandlerMethod handler) {
    IdempotentEndpoints.Endpoint endpoint = annotationAndSendContext(handler);
    if (endpoint != null) {
      advisable(endpoint, handler, IdempotentEndpointInvocations.class);
    }
  }

  /** A Spring MVC handler method: the checks of both stacks, then the MVC endpoint's own. */
  void springMvc(HandlerMethod handler) {
    IdempotentEndpoints.Endpoint endpoint = annotationAndSendContext(handler);
    if (endpoint == null) {
      return;
    }
    refuseUnguardedReturnType(endpoint, handler.getMethod());
    advisable(endpoint, handler, IdempotentEndpointAdvisor.class);
  }

  /**
   * Refuses a Spring MVC handler's return type whose async result the endpoint cannot follow across
   * a container timeout: its key would be released while its send runs, and a retry would send
   * again.
   */
  private static void refuseUnguardedReturnType(
      IdempotentEndpoints.Endpoint endpoint, Method method) {
    Class<?> returned = method.getReturnType();
    if (!CompletionStage.class.isAssignableFrom(returned)
        && ReactiveAdapterRegistry.getSharedInstance().getAdapter(returned) != null) {
      throw new IdempotencyConfigurationException(
          endpoint.where()
              + " returns "
              + returned.getName()
              + UNFOLLOWED_REACTIVE
              + ", and a retry would send again.",
          "Return a CompletableFuture (mono.toFuture()), or serve it from Spring WebFlux.");
    }
    Class<?> entityBody =
        HttpEntity.class.isAssignableFrom(returned)
            ? ResolvableType.forMethodReturnType(method)
                .as(HttpEntity.class)
                .getGeneric(0)
                .resolve()
            : null;
    if (entityBody != null
        && ReactiveAdapterRegistry.getSharedInstance().getAdapter(entityBody) != null) {
      throw new IdempotencyConfigurationException(
          endpoint.where()
              + " returns a "
              + returned.getSimpleName()
              + " of "
              + entityBody.getName()
              + UNFOLLOWED_REACTIVE
              + ", and a retry would send again.",
          "Return a CompletableFuture of the entity, or serve it from Spring WebFlux.");
    }
    if (CompletionStage.class.isAssignableFrom(returned)
        && returned != CompletionStage.class
        && returned != CompletableFuture.class) {
      throw new IdempotencyConfigurationException(
          endpoint.where()
              + " returns "
              + returned.getName()
              + ", a subtype of CompletionStage, which is not supported: its late result is not"
              + " followed across a container timeout (its key would be released while its send"
              + " runs).",
          "Declare the return type CompletableFuture or CompletionStage.");
    }
    if (LISTENABLE_FUTURE != null && LISTENABLE_FUTURE.isAssignableFrom(returned)) {
      throw new IdempotencyConfigurationException(
          endpoint.where()
              + " returns "
              + returned.getName()
              + ", a ListenableFuture, which is not supported: its late result is not followed"
              + " across a container timeout.",
          "Return listenableFuture.completable().");
    }
    if (DeferredResult.class.isAssignableFrom(returned) && returned != DeferredResult.class) {
      throw new IdempotencyConfigurationException(
          endpoint.where()
              + " returns "
              + returned.getName()
              + ", a subclass of DeferredResult, which is not supported: at a container timeout"
              + " its key would be released while its send runs.",
          "Return DeferredResult itself.");
    }
    if (Callable.class.isAssignableFrom(returned) && returned != Callable.class) {
      throw new IdempotencyConfigurationException(
          endpoint.where()
              + " returns "
              + returned.getName()
              + ", a subtype of Callable, which is not supported: its work cannot be shielded from"
              + " Spring MVC's interrupt at a timeout (a send cut off after the provider accepted"
              + " it would be released and sent again), nor released if its task never ran.",
          "Declare the return type Callable.");
    }
  }

  /** The handler's bean is advised by the stack's advisor, and its method can be advised. */
  private void advisable(
      IdempotentEndpoints.Endpoint endpoint, HandlerMethod handler, Class<?> advisorType) {
    Method method = handler.getMethod();
    if (Modifier.isFinal(method.getModifiers()) || Modifier.isPrivate(method.getModifiers())) {
      throw new IdempotencyConfigurationException(
          endpoint.where()
              + ": the method is "
              + (Modifier.isPrivate(method.getModifiers()) ? "private" : "final")
              + ", so Spring AOP cannot see the handler start, and the response could never be"
              + " stored.",
          "Make it public and not final.");
    }
    Object bean = singleton(handler);
    if (bean == null) {
      return; // created per request or scope: checked when it is
    }
    Advisor ours =
        AopUtils.isAopProxy(bean) && bean instanceof Advised proxy
            ? Arrays.stream(proxy.getAdvisors())
                .filter(advisorType::isInstance)
                .findFirst()
                .orElse(null)
            : null;
    if (ours == null) {
      throw new IdempotencyConfigurationException(
          endpoint.where()
              + ": its bean is not advised by the "
              + advisorType.getSimpleName()
              + " (is its class final, or the auto-proxy creator off?), so the handler start cannot"
              + " be seen and the response could never be stored.",
          "Let Spring proxy the controller: a class that is not final, and Spring's auto-proxy"
              + " creator on (the auto-configuration registers it).");
    }
    innermost((Advised) bean, ours, endpoint);
  }

  /**
   * Moves the stack's advisor to the end of the proxy's chain, next to the method: an advisor added
   * to an existing proxy after the auto-proxy creator made it ({@code
   * MethodValidationPostProcessor} for a class-level {@code @Validated} controller appends its own)
   * would otherwise run inside it, and a call it refuses before the method body would count as a
   * started handler (its refusal stored, the corrected retry refused 422).
   */
  private static void innermost(
      Advised proxy, Advisor ours, IdempotentEndpoints.Endpoint endpoint) {
    Advisor[] advisors = proxy.getAdvisors();
    if (advisors[advisors.length - 1] == ours) {
      return;
    }
    if (proxy.isFrozen()) {
      throw new IdempotencyConfigurationException(
          endpoint.where()
              + ": its proxy is frozen with advice inside the "
              + ours.getClass().getSimpleName()
              + ", so a call that advice refuses before the method body (method validation) would"
              + " count as a started handler and its refusal be stored.",
          "Do not freeze the proxy.");
    }
    proxy.removeAdvisor(ours);
    proxy.addAdvisor(ours);
  }

  /** The endpoint a handler is (its annotation read and checked), or null if not annotated. */
  private IdempotentEndpoints.@Nullable Endpoint annotationAndSendContext(HandlerMethod handler) {
    IdempotentEndpoints.Endpoint endpoint = endpoints.find(handler);
    Method method = handler.getMethod();
    if (endpoint == null) {
      annotatedOnlyBehindAnInterface(handler);
    }
    if (endpoint == null && Arrays.asList(method.getParameterTypes()).contains(SendContext.class)) {
      throw new IdempotencyConfigurationException(
          IdempotentEndpoints.describe(method)
              + " takes a SendContext, which only @IdempotentEndpoint handlers get.",
          "Annotate it with @IdempotentEndpoint, or remove the parameter.");
    }
    return endpoint;
  }

  /**
   * A handler mapped through an interface of a JDK proxy whose implementing method, not the
   * interface's, carries the annotation: the request reaches the interface method, so the endpoint
   * would silently not be guarded (every repeat would send again).
   */
  private void annotatedOnlyBehindAnInterface(HandlerMethod handler) {
    Object bean = singleton(handler);
    if (bean == null || !AopUtils.isJdkDynamicProxy(bean)) {
      return;
    }
    Method implementation =
        AopUtils.getMostSpecificMethod(handler.getMethod(), AopUtils.getTargetClass(bean));
    if (!implementation.equals(handler.getMethod())
        && AnnotatedElementUtils.hasAnnotation(implementation, IdempotentEndpoint.class)) {
      throw new IdempotencyConfigurationException(
          IdempotentEndpoints.describe(implementation)
              + " carries @IdempotentEndpoint, but its bean is a JDK proxy mapped through the"
              + " interface method, which does not: the endpoint would not be guarded.",
          "Annotate the interface method too, or let Spring proxy classes"
              + " (spring.aop.proxy-target-class=true).");
    }
  }

  /** The handler's bean, or null if it is not a singleton (created per request or scope). */
  private @Nullable Object singleton(HandlerMethod handler) {
    Object bean = handler.getBean();
    if (bean instanceof String beanName) {
      return beanFactory.isSingleton(beanName) ? beanFactory.getBean(beanName) : null;
    }
    return bean;
  }

  /** The class of that name, looked up once; null where it is not on the class path. */
  private static @Nullable Class<?> classOrNull(String name) {
    try {
      return ClassUtils.forName(name, EndpointStartupChecks.class.getClassLoader());
    } catch (ClassNotFoundException | LinkageError e) {
      return null;
    }
  }

  /** Spring MVC's mappings, in a class of their own: loaded only where Spring MVC is. */
  private static final class SpringMvcMappings {
    static List<HandlerMethod> handlers(ListableBeanFactory beanFactory) {
      return beanFactory
          .getBeansOfType(
              org.springframework.web.servlet.mvc.method.annotation.RequestMappingHandlerMapping
                  .class,
              false,
              false)
          .values()
          .stream()
          .flatMap(mapping -> mapping.getHandlerMethods().values().stream())
          .toList();
    }
  }

  /** Spring WebFlux's mappings, in a class of their own: loaded only where WebFlux is. */
  private static final class WebFluxMappings {
    static List<HandlerMethod> handlers(ListableBeanFactory beanFactory) {
      return beanFactory
          .getBeansOfType(
              org.springframework.web.reactive.result.method.annotation.RequestMappingHandlerMapping
                  .class,
              false,
              false)
          .values()
          .stream()
          .flatMap(mapping -> mapping.getHandlerMethods().values().stream())
          .toList();
    }
  }
}
