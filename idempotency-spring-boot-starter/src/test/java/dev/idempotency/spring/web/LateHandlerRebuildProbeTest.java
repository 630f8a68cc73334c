package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.app.NotifyTestApplication;
import java.net.URI;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.support.MergedBeanDefinitionPostProcessor;
import org.springframework.beans.factory.support.RootBeanDefinition;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.MethodParameter;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.context.request.NativeWebRequest;
import org.springframework.web.method.support.AsyncHandlerMethodReturnValueHandler;
import org.springframework.web.method.support.HandlerMethodReturnValueHandler;
import org.springframework.web.method.support.ModelAndViewContainer;
import org.springframework.web.servlet.mvc.method.annotation.CallableMethodReturnValueHandler;
import org.springframework.web.servlet.mvc.method.annotation.RequestMappingHandlerAdapter;

/**
 * Probe44 (issue 37, against fix42s): an application bean post-processor that runs AFTER the
 * starter's {@link AsyncWorkShield} and puts a return value handler of its own first in the
 * adapter's list: a context-propagating {@code Callable} handler (as MDC / security / tracing
 * context propagation does) that decorates the {@code Callable} and hands it to a {@link
 * CallableMethodReturnValueHandler} of its own. Spring runs internal post-processors (a {@link
 * MergedBeanDefinitionPostProcessor}) after every other one, so this one sees the starter's
 * already-wrapped list and adds an unwrapped handler in front of it.
 *
 * <p>A handler declared {@code Callable} waits interruptibly for its provider call (3 s); the
 * container timeout is 1 s. SPEC 1/13 and docs/spring-boot.md (the async timeout row): the work is
 * not interrupted, the key stays claimed, one provider send whatever the retries.
 */
@Tag("open-finding")
@SpringBootTest(
    classes = {
      NotifyTestApplication.class,
      LateHandlerRebuildProbeTest.LateRebuild.class,
      LateHandlerRebuildProbeTest.WaitingController.class
    },
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
    properties = {
      "idempotency.store=memory",
      "spring.mvc.async.request-timeout=1s",
      "idempotency.close-grace-period=1s"
    })
class LateHandlerRebuildProbeTest extends RunningApplication {

  @Test
  void aCallableHandedToAHandlerAddedAfterTheStarterSendsOncePerKey() throws Exception {
    String key = EndpointClient.newKey();
    int before = WaitingController.sends.get();

    HttpResponse<byte[]> first = post("/probe44/late/callable", key, "{}");
    // a client retries a 409 (Retry-After) and a 5xx alike, until it gets its answer (bounded)
    HttpResponse<byte[]> retry = first;
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
    while (retry.statusCode() != 201 && System.nanoTime() < deadline) {
      Thread.sleep(200);
      retry = post("/probe44/late/callable", key, "{}");
    }
    long settle = System.nanoTime() + Duration.ofSeconds(15).toNanos();
    while (WaitingController.pending.get() > 0 && System.nanoTime() < settle) {
      Thread.sleep(20);
    }

    assertThat(LateRebuild.propagated.get())
        .as("the application's own Callable handler ran (the probe's premise)")
        .isPositive();
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

  /** The application's late post-processor. */
  @Configuration(proxyBeanMethods = false)
  static class LateRebuild {
    static final AtomicInteger propagated = new AtomicInteger();

    @Bean
    static MergedBeanDefinitionPostProcessor contextPropagatingCallables() {
      return new LateProcessor();
    }
  }

  /** Runs after every ordinary post-processor, the starter's included. */
  static final class LateProcessor implements MergedBeanDefinitionPostProcessor {
    @Override
    public void postProcessMergedBeanDefinition(
        RootBeanDefinition beanDefinition, Class<?> beanType, String beanName) {}

    @Override
    public Object postProcessAfterInitialization(Object bean, String beanName) {
      if (bean instanceof RequestMappingHandlerAdapter adapter
          && adapter.getReturnValueHandlers() != null) {
        List<HandlerMethodReturnValueHandler> handlers = new ArrayList<>();
        handlers.add(new PropagatingCallables());
        handlers.addAll(adapter.getReturnValueHandlers());
        adapter.setReturnValueHandlers(handlers);
      }
      return bean;
    }
  }

  /** Decorates a Callable with the caller's context, then lets Spring MVC's handler run it. */
  static final class PropagatingCallables implements AsyncHandlerMethodReturnValueHandler {
    private final CallableMethodReturnValueHandler spring = new CallableMethodReturnValueHandler();

    @Override
    public boolean supportsReturnType(MethodParameter returnType) {
      return spring.supportsReturnType(returnType);
    }

    @Override
    public boolean isAsyncReturnValue(Object returnValue, MethodParameter returnType) {
      return returnValue instanceof Callable<?>;
    }

    @Override
    public void handleReturnValue(
        Object returnValue,
        MethodParameter returnType,
        ModelAndViewContainer mavContainer,
        NativeWebRequest webRequest)
        throws Exception {
      Object value = returnValue;
      if (returnValue instanceof Callable<?> callable) {
        LateRebuild.propagated.incrementAndGet();
        value = (Callable<Object>) () -> callable.call(); // restores a context around the call
      }
      spring.handleReturnValue(value, returnType, mavContainer, webRequest);
    }
  }

  @RestController
  static class WaitingController {
    private static final Executor PROVIDER = CompletableFuture.delayedExecutor(3, TimeUnit.SECONDS);
    static final AtomicInteger sends = new AtomicInteger();
    static final AtomicInteger pending = new AtomicInteger();

    @PostMapping("/probe44/late/callable")
    @IdempotentEndpoint
    public Callable<ResponseEntity<Map<String, Object>>> callable() {
      pending.incrementAndGet();
      CompletableFuture<ResponseEntity<Map<String, Object>>> provider =
          CompletableFuture.supplyAsync(
              () -> {
                int run = sends.incrementAndGet();
                pending.decrementAndGet();
                return ResponseEntity.created(URI.create("/probe44/" + run))
                    .body(Map.<String, Object>of("run", run));
              },
              PROVIDER);
      return provider::get; // waits interruptibly for the provider call
    }
  }
}
