package dev.idempotency.spring.suite;

import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.KeyStoreException;
import dev.idempotency.spring.Idempotent;
import dev.idempotency.spring.reactive.NettyServer;
import dev.idempotency.spring.web.IdempotentEndpoint;
import java.lang.reflect.Method;
import java.util.Map;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.http.HttpStatus;
import org.springframework.http.ResponseEntity;
import org.springframework.http.client.ReactorResourceFactory;
import org.springframework.util.ReflectionUtils;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * The entry-point suite's Spring WebFlux application (on Reactor Netty): a WebFlux
 * {@code @IdempotentEndpoint}, and a plain handler calling an {@code @Idempotent} method that
 * returns a {@code Mono}. The provider's blocking client runs on {@code boundedElastic}, as an
 * application would run it. {@link Stack#WEBFLUX} starts it.
 */
@SpringBootConfiguration(proxyBeanMethods = false)
@EnableAutoConfiguration
@Import({NettyServer.class, SuiteBeans.class})
public class SuiteWebFluxApplication {

  /**
   * Reactor Netty resources of this application's own. The global ones, which the server would
   * otherwise run on, are disposed when any WebFlux application of the test JVM closes (the
   * shutdown hazard closes two), which closed the shared application's server with them.
   */
  @Bean
  ReactorResourceFactory reactorResourceFactory() {
    ReactorResourceFactory resources = new ReactorResourceFactory();
    resources.setUseGlobalResources(false);
    return resources;
  }

  /**
   * Runs the Netty server of {@link NettyServer} (a class of either Boot line, so reached by its
   * setter's name) on this application's own resources.
   */
  @Bean
  static BeanPostProcessor serverOnOwnResources(ObjectProvider<ReactorResourceFactory> resources) {
    return new BeanPostProcessor() {
      @Override
      public Object postProcessBeforeInitialization(Object bean, String name) {
        Method setter =
            ReflectionUtils.findMethod(
                bean.getClass(), "setResourceFactory", ReactorResourceFactory.class);
        if (setter != null && bean.getClass().getSimpleName().startsWith("Netty")) {
          ReflectionUtils.invokeMethod(setter, bean, resources.getObject());
        }
        return bean;
      }
    };
  }

  @Bean
  MonoSender monoSender(SuiteProvider provider) {
    return new MonoSender(provider);
  }

  /** An {@code @Idempotent} method returning a {@code Mono}. */
  public static class MonoSender {
    private final SuiteProvider provider;

    MonoSender(SuiteProvider provider) {
      this.provider = provider;
    }

    @Idempotent(name = "suite-mono-method", key = "#key")
    public Mono<String> send(String key) {
      return Mono.fromCallable(() -> provider.send(key)).subscribeOn(Schedulers.boundedElastic());
    }
  }

  /** The entry points over HTTP (a member class of the configuration, registered with it). */
  @RestController
  public static class SuiteWebFluxController {
    private final SuiteProvider provider;
    private final MonoSender sender;

    SuiteWebFluxController(SuiteProvider provider, MonoSender sender) {
      this.provider = provider;
      this.sender = sender;
    }

    @PostMapping("/suite/webflux-endpoint")
    @IdempotentEndpoint
    public Mono<Map<String, String>> endpoint(@RequestHeader("Idempotency-Key") String key) {
      return Mono.fromCallable(() -> Map.of("sent", provider.send(key)))
          .subscribeOn(Schedulers.boundedElastic());
    }

    /**
     * Calls the guarded method; the application answers its refusals itself, with the statuses the
     * MVC stack uses (its own handling, before the starter's {@code IdempotencyExceptionHandler}).
     */
    @PostMapping("/suite/mono-method")
    public Mono<ResponseEntity<Map<String, String>>> method(
        @RequestHeader("Idempotency-Key") String key) {
      return sender
          .send(key)
          .map(sent -> ResponseEntity.ok(Map.of("sent", sent)))
          .onErrorResume(failure -> Mono.just(refusal(failure)));
    }

    private static ResponseEntity<Map<String, String>> refusal(Throwable failure) {
      HttpStatus status;
      if (failure instanceof IllegalArgumentException) { // InvalidKeyException among them
        status = HttpStatus.BAD_REQUEST;
      } else if (failure instanceof IdempotencyInProgressException) {
        status = HttpStatus.CONFLICT;
      } else if (failure instanceof KeyStoreException) {
        status = HttpStatus.SERVICE_UNAVAILABLE;
      } else {
        status = HttpStatus.INTERNAL_SERVER_ERROR;
      }
      String detail = failure.getClass().getSimpleName() + ": " + failure.getMessage();
      ResponseEntity.BodyBuilder answer = ResponseEntity.status(status);
      if (status == HttpStatus.CONFLICT) {
        answer.header("Retry-After", "1");
      }
      return answer.body(Map.of("refused", detail));
    }
  }
}
