package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.URI;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.MethodParameter;
import org.springframework.core.Ordered;
import org.springframework.core.PriorityOrdered;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.context.request.NativeWebRequest;
import org.springframework.web.method.support.HandlerMethodReturnValueHandler;
import org.springframework.web.method.support.ModelAndViewContainer;
import org.springframework.web.servlet.config.annotation.WebMvcConfigurer;
import org.springframework.web.servlet.mvc.method.annotation.RequestMappingHandlerAdapter;

/**
 * Issue 37 (found by probe42h against fix41b, whose AsyncWorkShield wrapped Spring MVC's async
 * handlers by their exact class): an application whose own bean post-processor (ordered first, as a
 * tracing or response-wrapping library's may be) decorates every return value handler of the
 * RequestMappingHandlerAdapter. A handler declared {@code Callable} waits interruptibly for its
 * provider call (3 s), the container timeout is 1 s. SPEC 1/13: the work is not interrupted, the
 * key stays claimed, one provider send whatever the retries. The application also adds a return
 * value handler of its own ({@code addReturnValueHandlers}), which is wrapped like Spring MVC's.
 * The context is {@link LateHandlerRebuildTest}'s, whose handler added after the starter's shield
 * (by a post-processor that runs last) is wrapped too, once every singleton exists.
 */
@ReturnValueHandlersApplicationTest
class DecoratedHandlersCallableTest extends RunningApplication {

  @Autowired RequestMappingHandlerAdapter adapter;

  @Test
  void aDeclaredCallableBehindDecoratedHandlersSendsOncePerKey() throws Exception {
    String key = EndpointClient.newKey();
    int before = WaitingController.sends.get();

    HttpResponse<byte[]> first = post("/probe42h/decorated/callable", key, "{}");
    // a client retries a 409 (Retry-After) and a 5xx alike, until it gets its answer (bounded)
    HttpResponse<byte[]> retry = first;
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
    while (retry.statusCode() != 201 && System.nanoTime() < deadline) {
      Thread.sleep(200);
      retry = post("/probe42h/decorated/callable", key, "{}");
    }
    long settle = System.nanoTime() + Duration.ofSeconds(15).toNanos();
    while (WaitingController.pending.get() > 0 && System.nanoTime() < settle) {
      Thread.sleep(20);
    }

    assertThat(WaitingController.sends.get() - before)
        .as(
            "provider sends for one key (first %s %s, last retry %s %s)",
            first.statusCode(),
            EndpointClient.text(first),
            retry.statusCode(),
            EndpointClient.text(retry))
        .isEqualTo(1);
    assertThat(retry.statusCode()).as("the retried request's answer").isEqualTo(201);
  }

  @Test
  void everyReturnValueHandlerIsShieldedIncludingTheApplicationsOwn() {
    List<HandlerMethodReturnValueHandler> handlers = adapter.getReturnValueHandlers();

    assertThat(handlers).isNotEmpty();
    assertThat(handlers)
        .allSatisfy(
            handler ->
                assertThat(handler.getClass().getName())
                    .startsWith(AsyncWorkShield.class.getName() + "$"));
    assertThat(Decorating.tracedOwnHandler).as("the application's own handler was traced").isTrue();
    assertThat(LateHandlerRebuildTest.LateProcessor.rebuilt)
        .as("a handler was added after the starter's post-processor (LateHandlerRebuildTest)")
        .contains(adapter);
  }

  /**
   * A library's decoration of every return value handler, ordered before other processors, and the
   * application's own return value handler.
   */
  @Configuration(proxyBeanMethods = false)
  static class Decorating implements WebMvcConfigurer {
    static volatile boolean tracedOwnHandler;

    @Bean
    static BeanPostProcessor tracingReturnValueHandlers() {
      return new TracingProcessor();
    }

    @Override
    public void addReturnValueHandlers(List<HandlerMethodReturnValueHandler> handlers) {
      handlers.add(new OwnHandler());
    }
  }

  /** The application's own handler, for a type no handler method here returns. */
  static final class OwnHandler implements HandlerMethodReturnValueHandler {
    @Override
    public boolean supportsReturnType(MethodParameter returnType) {
      return returnType.getParameterType() == OwnHandler.class;
    }

    @Override
    public void handleReturnValue(
        Object returnValue,
        MethodParameter returnType,
        ModelAndViewContainer mavContainer,
        NativeWebRequest webRequest) {
      mavContainer.setRequestHandled(true);
    }
  }

  static final class TracingProcessor implements BeanPostProcessor, PriorityOrdered {
    @Override
    public Object postProcessAfterInitialization(Object bean, String beanName) {
      if (bean instanceof RequestMappingHandlerAdapter adapter
          && adapter.getReturnValueHandlers() != null) {
        List<HandlerMethodReturnValueHandler> traced =
            adapter.getReturnValueHandlers().stream()
                .<HandlerMethodReturnValueHandler>map(Traced::new)
                .toList();
        if (adapter.getReturnValueHandlers().stream().anyMatch(OwnHandler.class::isInstance)) {
          // Spring MVC's adapter; the application's second one (LateHandlerRebuildTest) has none
          Decorating.tracedOwnHandler = true;
        }
        adapter.setReturnValueHandlers(traced);
      }
      return bean;
    }

    @Override
    public int getOrder() {
      return Ordered.HIGHEST_PRECEDENCE;
    }
  }

  /** Delegates, as a tracing decorator does. */
  record Traced(HandlerMethodReturnValueHandler delegate)
      implements HandlerMethodReturnValueHandler {
    @Override
    public boolean supportsReturnType(MethodParameter returnType) {
      return delegate.supportsReturnType(returnType);
    }

    @Override
    public void handleReturnValue(
        Object returnValue,
        MethodParameter returnType,
        ModelAndViewContainer mavContainer,
        NativeWebRequest webRequest)
        throws Exception {
      delegate.handleReturnValue(returnValue, returnType, mavContainer, webRequest);
    }
  }

  @RestController
  static class WaitingController {
    private static final Executor PROVIDER = CompletableFuture.delayedExecutor(3, TimeUnit.SECONDS);
    static final AtomicInteger sends = new AtomicInteger();
    static final AtomicInteger pending = new AtomicInteger();

    @PostMapping("/probe42h/decorated/callable")
    @IdempotentEndpoint
    public Callable<ResponseEntity<Map<String, Object>>> callable() {
      pending.incrementAndGet();
      CompletableFuture<ResponseEntity<Map<String, Object>>> provider =
          CompletableFuture.supplyAsync(
              () -> {
                int run = sends.incrementAndGet();
                pending.decrementAndGet();
                return ResponseEntity.created(URI.create("/probe42h/" + run))
                    .body(Map.<String, Object>of("run", run));
              },
              PROVIDER);
      return provider::get; // waits interruptibly for the provider call
    }
  }
}
