package dev.idempotency.spring.autoconfigure;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.spring.JsonCodecs;
import dev.idempotency.spring.web.IdempotencyExceptionHandler;
import dev.idempotency.spring.web.IdempotentEndpointHandlerAdapter;
import dev.idempotency.spring.web.IdempotentEndpointInvocations;
import dev.idempotency.spring.web.IdempotentEndpointWebFilter;
import dev.idempotency.spring.web.IdempotentEndpoints;
import dev.idempotency.spring.web.ReactiveSendContextArgumentResolver;
import java.util.List;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.config.BeanDefinition;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnWebApplication;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.context.annotation.Role;
import org.springframework.http.codec.ServerCodecConfigurer;
import org.springframework.util.function.SingletonSupplier;
import org.springframework.web.reactive.DispatcherHandler;
import org.springframework.web.reactive.config.WebFluxConfigurer;
import org.springframework.web.reactive.result.method.annotation.ArgumentResolverConfigurer;
import org.springframework.web.reactive.result.method.annotation.RequestMappingHandlerAdapter;
import org.springframework.web.reactive.result.method.annotation.RequestMappingHandlerMapping;
import org.springframework.web.server.WebExceptionHandler;

/**
 * Auto-configuration of {@link dev.idempotency.spring.web.IdempotentEndpoint} for Spring WebFlux:
 * the {@link IdempotentEndpointWebFilter} around the annotated handler methods, the {@link
 * IdempotentEndpointInvocations} advisor that sees them invoked, the {@link
 * IdempotentEndpointHandlerAdapter} that refuses a guarded handler the filter did not see, and the
 * {@link IdempotencyExceptionHandler} for {@code @Idempotent} methods' refusals (defined once for
 * both stacks, {@code IdempotencyProblemDetailsConfiguration}). Applies to reactive web
 * applications only, as {@link IdempotencyWebMvcAutoConfiguration} applies to servlet ones, so that
 * an application gets the beans of its own stack and never the other's.
 */
@AutoConfiguration(
    after = IdempotencyAutoConfiguration.class,
    afterName = {
      "org.springframework.boot.autoconfigure.web.reactive.WebFluxAutoConfiguration",
      "org.springframework.boot.webflux.autoconfigure.WebFluxAutoConfiguration"
    })
@ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.REACTIVE)
@ConditionalOnClass(DispatcherHandler.class)
@ConditionalOnBean(IdempotencyGuard.class)
@Import({
  IdempotencyAutoConfiguration.IdempotentMethodsConfiguration.AutoProxy.class,
  IdempotencyProblemDetailsConfiguration.class
})
public final class IdempotencyWebFluxAutoConfiguration {

  /** Created by Spring Boot. */
  public IdempotencyWebFluxAutoConfiguration() {}

  /**
   * The annotated handler methods.
   *
   * @param beanFactory to tell the auto-configured guard (whose lease is known) from one of the
   *     application's
   * @param properties the properties
   * @return the registry
   */
  @Bean
  @ConditionalOnMissingBean
  public IdempotentEndpoints idempotentEndpoints(
      ConfigurableListableBeanFactory beanFactory,
      ObjectProvider<IdempotencyProperties> properties) {
    return new IdempotentEndpoints(
        operation -> properties.getObject().ttlOf(operation),
        () -> IdempotencyAutoConfiguration.autoConfiguredLease(beanFactory, properties));
  }

  /**
   * Sees the handler methods invoked: an infrastructure advisor, applied by the auto-proxy creator.
   *
   * @return the advisor
   */
  @Bean
  @Role(BeanDefinition.ROLE_INFRASTRUCTURE)
  @ConditionalOnMissingBean
  public static IdempotentEndpointInvocations idempotentEndpointInvocations() {
    return new IdempotentEndpointInvocations();
  }

  /**
   * Refuses a guarded handler reached by a request the filter did not guard (a later filter changed
   * it); delegates everything else to the annotated-controller adapter.
   *
   * @param endpoints the annotated handler methods
   * @param adapter the application's annotated-controller adapter
   * @return the adapter
   */
  @Bean
  @ConditionalOnMissingBean
  public IdempotentEndpointHandlerAdapter idempotentEndpointHandlerAdapter(
      IdempotentEndpoints endpoints, ObjectProvider<RequestMappingHandlerAdapter> adapter) {
    return new IdempotentEndpointHandlerAdapter(
        endpoints, SingletonSupplier.of(adapter::getObject));
  }

  /**
   * The filter that claims, replays and refuses.
   *
   * @param guards the guards of the context's hierarchy (the closest context's is used)
   * @param beanFactory the context's beans, where the closest guard is looked for
   * @param endpoints the annotated handler methods
   * @param mappings the application's annotated-controller mappings
   * @param json the application's JSON codecs, for fingerprints of JSON bodies
   * @param properties the properties
   * @param exceptionHandlers the application's {@code WebExceptionHandler}s, which answer a guarded
   *     handler's error inside the filter
   * @param codecs the application's codecs, for a guarded request's form and multipart data
   * @param invocations the advisor that sees the handler methods invoked
   * @return the filter
   */
  @Bean
  @ConditionalOnMissingBean
  public IdempotentEndpointWebFilter idempotentEndpointWebFilter(
      ObjectProvider<IdempotencyGuard> guards,
      org.springframework.beans.factory.ListableBeanFactory beanFactory,
      IdempotentEndpoints endpoints,
      ObjectProvider<RequestMappingHandlerMapping> mappings,
      ObjectProvider<JsonCodecs> json,
      IdempotencyProperties properties,
      ObjectProvider<WebExceptionHandler> exceptionHandlers,
      ObjectProvider<ServerCodecConfigurer> codecs,
      IdempotentEndpointInvocations invocations) {
    IdempotencyProperties.Http http = properties.getHttp();
    // each looked up at the first request, once the context is refreshed, not on every request
    return new IdempotentEndpointWebFilter(
        ClosestGuard.of(beanFactory, guards).get(),
        endpoints,
        SingletonSupplier.of(() -> List.copyOf(mappings.orderedStream().toList())),
        SingletonSupplier.of(json::getIfAvailable),
        http.getHeader(),
        http.getMinKeyLength(),
        http.getMaxBodySize().toBytes(),
        http.getMaxResponseSize().toBytes(),
        http.getRecordWait(),
        SingletonSupplier.of(() -> List.copyOf(exceptionHandlers.orderedStream().toList())),
        SingletonSupplier.of(
            () -> List.copyOf(codecs.getIfAvailable(ServerCodecConfigurer::create).getReaders())),
        invocations);
  }

  /**
   * Lets WebFlux handler methods take a {@link dev.idempotency.SendContext} parameter.
   *
   * @return the configurer
   */
  @Bean
  @ConditionalOnMissingBean(name = "idempotencyWebFluxConfigurer")
  public WebFluxConfigurer idempotencyWebFluxConfigurer() {
    return new WebFluxConfigurer() {
      @Override
      public void configureArgumentResolvers(ArgumentResolverConfigurer configurer) {
        configurer.addCustomResolver(new ReactiveSendContextArgumentResolver());
      }
    };
  }
}
