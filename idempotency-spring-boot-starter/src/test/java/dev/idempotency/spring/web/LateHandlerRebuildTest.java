package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.Serializable;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import java.net.URI;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.assertj.core.api.SoftAssertions;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.beans.factory.support.MergedBeanDefinitionPostProcessor;
import org.springframework.beans.factory.support.RootBeanDefinition;
import org.springframework.context.ApplicationContext;
import org.springframework.context.ApplicationListener;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.event.ContextRefreshedEvent;
import org.springframework.core.MethodParameter;
import org.springframework.core.Ordered;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.context.request.NativeWebRequest;
import org.springframework.web.method.HandlerMethod;
import org.springframework.web.method.support.AsyncHandlerMethodReturnValueHandler;
import org.springframework.web.method.support.HandlerMethodReturnValueHandler;
import org.springframework.web.method.support.ModelAndViewContainer;
import org.springframework.web.servlet.ModelAndView;
import org.springframework.web.servlet.mvc.method.annotation.CallableMethodReturnValueHandler;
import org.springframework.web.servlet.mvc.method.annotation.RequestMappingHandlerAdapter;

/**
 * Issue 37 (found by probe44 against fix42s, whose {@link AsyncWorkShield} wrapped an adapter's
 * handlers once, in its {@code postProcessAfterInitialization}): an application that changes a
 * {@link RequestMappingHandlerAdapter}'s return value handlers after the starter's shield looked at
 * them. Its context-propagating {@code Callable} handler (as MDC, security or tracing context
 * propagation does: it decorates the {@code Callable} and hands it to a {@link
 * CallableMethodReturnValueHandler} of its own) is put first in every adapter's already wrapped
 * list by a {@link MergedBeanDefinitionPostProcessor}, which Spring runs after every other
 * post-processor; a second adapter of the application's, ordered first, handles the {@link
 * SecondAdapterController}; and, once the context is refreshed, a listener puts one more such
 * handler into that adapter's list, after every singleton exists.
 *
 * <p>Each handler waits interruptibly for its provider call (3 s); the container timeout is 1 s.
 * SPEC 1/13 and docs/spring-boot.md (the async timeout row): the work is not interrupted, the key
 * stays claimed, one provider send whatever the retries. Before the fix every path here was sent 12
 * times for one key in the test's 20 s of retries (answers 500, the key released each time). The
 * {@code Serializable} ones are shielded only by the wrapping of every adapter's handlers once all
 * singletons exist; the one through the handler added at the refresh only by the advisor, which
 * shields a declared {@code Callable} where the method returns it. The four run at once, so the
 * test takes about one provider call's time. The context is {@link
 * DecoratedHandlersCallableTest}'s.
 */
@ReturnValueHandlersApplicationTest
class LateHandlerRebuildTest extends RunningApplication {

  /**
   * Declared {@code Callable}, through a handler added after the starter's post-processor (the
   * probe's case), with a handler declared {@code Serializable} (which Spring MVC runs as async
   * work by its runtime class, so only a wrapped handler can shield it), on both adapters; the last
   * through the handler added at the refresh, on the second adapter.
   */
  private static final List<String> PATHS =
      List.of(
          "/late44/callable",
          "/late44/serializable",
          "/late44/second/serializable",
          "/late44/second/refreshed");

  @Autowired ApplicationContext context;

  @Test
  void aCallableHandedToAHandlerAddedLateSendsOncePerKey() throws Exception {
    Map<String, Integer> before = new ConcurrentHashMap<>();
    PATHS.forEach(path -> before.put(path, sends(path)));
    int secondAdapterBefore = SecondAdapter.handled.get();
    Map<String, Future<Exchanges>> exchanges = new ConcurrentHashMap<>();
    ExecutorService clients = Executors.newFixedThreadPool(PATHS.size());
    try {
      for (String path : PATHS) {
        exchanges.put(path, clients.submit(() -> retriedUntilAnswered(path)));
      }
      SoftAssertions softly = new SoftAssertions();
      for (String path : PATHS) {
        Exchanges answered = exchanges.get(path).get(60, TimeUnit.SECONDS);
        long settle = System.nanoTime() + Duration.ofSeconds(15).toNanos();
        while (LateController.pending.get(path).get() > 0 && System.nanoTime() < settle) {
          Thread.sleep(20);
        }
        softly
            .assertThat(sends(path) - before.get(path))
            .as(
                "%s: provider sends for one key (first %s %s, last retry %s %s)",
                path,
                answered.first().statusCode(),
                EndpointClient.text(answered.first()),
                answered.last().statusCode(),
                EndpointClient.text(answered.last()))
            .isEqualTo(1);
        softly
            .assertThat(answered.last().statusCode())
            .as("%s: the retried request's answer", path)
            .isEqualTo(201);
      }
      softly.assertAll();
    } finally {
      clients.shutdownNow();
    }

    // the premises: the application's late handlers ran, on the adapter meant
    assertThat(PropagatingCallables.ran.get()).as("the handlers added late ran").isPositive();
    assertThat(SecondAdapter.handled.get() - secondAdapterBefore)
        .as("requests the second adapter handled")
        .isGreaterThanOrEqualTo(2);
    List<HandlerMethodReturnValueHandler> second =
        context
            .getBean("secondAdapter", RequestMappingHandlerAdapter.class)
            .getReturnValueHandlers();
    assertThat(second)
        .as("the handler added at the refresh, after the starter last looked")
        .filteredOn(handler -> handler instanceof PropagatingCallables own && own.atRefresh)
        .hasSize(1);
  }

  private static int sends(String path) {
    return LateController.sends.get(path).get();
  }

  /** The first answer for a fresh key, and the last of a client's retries (bounded). */
  private Exchanges retriedUntilAnswered(String path) throws Exception {
    String key = EndpointClient.newKey();
    HttpResponse<byte[]> first = post(path, key, "{}");
    // a client retries a 409 (Retry-After) and a 5xx alike, until it gets its answer
    HttpResponse<byte[]> retry = first;
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (retry.statusCode() != 201 && System.nanoTime() < deadline) {
      Thread.sleep(200);
      retry = post(path, key, "{}");
    }
    return new Exchanges(first, retry);
  }

  record Exchanges(HttpResponse<byte[]> first, HttpResponse<byte[]> last) {}

  /** Marks the handler method whose {@code Callable} the handler added at the refresh takes. */
  @Target(ElementType.METHOD)
  @Retention(RetentionPolicy.RUNTIME)
  @interface AddedAtRefresh {}

  /** The application's late changes to the return value handlers, and its second adapter. */
  @Configuration(proxyBeanMethods = false)
  static class LateHandlers {

    @Bean
    static MergedBeanDefinitionPostProcessor contextPropagatingCallables() {
      return new LateProcessor();
    }

    /**
     * A second adapter, used by Spring MVC's {@code DispatcherServlet} (which takes every {@code
     * HandlerAdapter} bean, in order) for the {@link SecondAdapterController}; not a candidate for
     * autowiring, so the application's other injections still get Spring MVC's own.
     */
    @Bean(autowireCandidate = false)
    SecondAdapter secondAdapter(
        @Qualifier("requestMappingHandlerAdapter") RequestMappingHandlerAdapter main) {
      SecondAdapter second = new SecondAdapter();
      second.setOrder(Ordered.HIGHEST_PRECEDENCE);
      second.setMessageConverters(main.getMessageConverters());
      second.setAsyncRequestTimeout(1000);
      return second;
    }

    /** Long after the starter's shield looked at them: once the context is refreshed. */
    @Bean
    ApplicationListener<ContextRefreshedEvent> handlersAtRefresh() {
      return event -> {
        RequestMappingHandlerAdapter second =
            event.getApplicationContext().getBean("secondAdapter", SecondAdapter.class);
        List<HandlerMethodReturnValueHandler> handlers =
            new ArrayList<>(second.getReturnValueHandlers());
        if (handlers.stream()
            .noneMatch(handler -> handler instanceof PropagatingCallables own && own.atRefresh)) {
          handlers.add(0, new PropagatingCallables(true));
          second.setReturnValueHandlers(handlers);
        }
      };
    }
  }

  /** Runs after every ordinary post-processor, the starter's included. */
  static final class LateProcessor implements MergedBeanDefinitionPostProcessor {
    /** The adapters whose list it changed. */
    static final Set<Object> rebuilt =
        Collections.synchronizedSet(Collections.newSetFromMap(new IdentityHashMap<>()));

    @Override
    public void postProcessMergedBeanDefinition(
        RootBeanDefinition beanDefinition, Class<?> beanType, String beanName) {}

    @Override
    public Object postProcessAfterInitialization(Object bean, String beanName) {
      if (bean instanceof RequestMappingHandlerAdapter adapter
          && adapter.getReturnValueHandlers() != null) {
        List<HandlerMethodReturnValueHandler> handlers = new ArrayList<>();
        handlers.add(new PropagatingCallables(false));
        handlers.addAll(adapter.getReturnValueHandlers());
        adapter.setReturnValueHandlers(handlers);
        rebuilt.add(adapter);
      }
      return bean;
    }
  }

  /**
   * Decorates a Callable with the caller's context, then lets Spring MVC's handler run it. Only for
   * this test's handler methods, so the shared application's other tests see Spring MVC's own
   * handler; the one added at the refresh only for {@link AddedAtRefresh} methods.
   */
  static final class PropagatingCallables implements AsyncHandlerMethodReturnValueHandler {
    static final AtomicInteger ran = new AtomicInteger();
    private final CallableMethodReturnValueHandler spring = new CallableMethodReturnValueHandler();
    final boolean atRefresh;

    PropagatingCallables(boolean atRefresh) {
      this.atRefresh = atRefresh;
    }

    @Override
    public boolean supportsReturnType(MethodParameter returnType) {
      return returnType.getDeclaringClass().getEnclosingClass() == LateHandlerRebuildTest.class
          && returnType.hasMethodAnnotation(AddedAtRefresh.class) == atRefresh
          && spring.supportsReturnType(returnType);
    }

    @Override
    public boolean isAsyncReturnValue(Object returnValue, MethodParameter returnType) {
      // only for what it supports: Spring MVC then skips every handler that is not an async one
      return returnValue instanceof Callable<?> && supportsReturnType(returnType);
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
        ran.incrementAndGet();
        value = (Callable<Object>) () -> callable.call(); // restores a context around the call
      }
      spring.handleReturnValue(value, returnType, mavContainer, webRequest);
    }
  }

  /** The application's second adapter: for the {@link SecondAdapterController} only. */
  static final class SecondAdapter extends RequestMappingHandlerAdapter {
    static final AtomicInteger handled = new AtomicInteger();

    @Override
    protected boolean supportsInternal(HandlerMethod handlerMethod) {
      return handlerMethod.getBeanType() == SecondAdapterController.class;
    }

    @Override
    protected ModelAndView handleInternal(
        HttpServletRequest request, HttpServletResponse response, HandlerMethod handlerMethod)
        throws Exception {
      handled.incrementAndGet();
      return super.handleInternal(request, response, handlerMethod);
    }
  }

  @RestController
  static class LateController {
    private static final Executor PROVIDER = CompletableFuture.delayedExecutor(3, TimeUnit.SECONDS);
    static final Map<String, AtomicInteger> sends = counters();
    static final Map<String, AtomicInteger> pending = counters();

    private static Map<String, AtomicInteger> counters() {
      Map<String, AtomicInteger> counters = new ConcurrentHashMap<>();
      PATHS.forEach(path -> counters.put(path, new AtomicInteger()));
      return counters;
    }

    /** The work: a provider call (3 s), waited for interruptibly. */
    static ResponseEntity<Map<String, Object>> work(String path) throws Exception {
      pending.get(path).incrementAndGet();
      CompletableFuture<Integer> provider =
          CompletableFuture.supplyAsync(
              () -> {
                int run = sends.get(path).incrementAndGet();
                pending.get(path).decrementAndGet();
                return run;
              },
              PROVIDER);
      int run = provider.get(); // an interrupt here fails the work after (or while) it sends
      return ResponseEntity.created(URI.create(path + "/" + run))
          .body(Map.<String, Object>of("run", run));
    }

    @PostMapping("/late44/callable")
    @IdempotentEndpoint
    public Callable<ResponseEntity<Map<String, Object>>> callable() {
      return () -> work("/late44/callable");
    }

    @PostMapping("/late44/serializable")
    @IdempotentEndpoint
    public Serializable serializable() {
      return (Callable<ResponseEntity<Map<String, Object>>> & Serializable)
          () -> work("/late44/serializable");
    }
  }

  /** Handled by the application's second adapter. */
  @RestController
  static class SecondAdapterController {

    @PostMapping("/late44/second/serializable")
    @IdempotentEndpoint
    public Serializable serializable() {
      return (Callable<ResponseEntity<Map<String, Object>>> & Serializable)
          () -> LateController.work("/late44/second/serializable");
    }

    @PostMapping("/late44/second/refreshed")
    @IdempotentEndpoint
    @AddedAtRefresh
    public Callable<ResponseEntity<Map<String, Object>>> refreshed() {
      return () -> LateController.work("/late44/second/refreshed");
    }
  }
}
