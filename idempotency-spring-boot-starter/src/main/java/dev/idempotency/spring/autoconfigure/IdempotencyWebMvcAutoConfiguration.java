package dev.idempotency.spring.autoconfigure;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.spring.JsonCodecs;
import dev.idempotency.spring.web.AsyncWorkShield;
import dev.idempotency.spring.web.IdempotencyExceptionHandler;
import dev.idempotency.spring.web.IdempotencyKeyScope;
import dev.idempotency.spring.web.IdempotentEndpointAdvisor;
import dev.idempotency.spring.web.IdempotentEndpointFilter;
import dev.idempotency.spring.web.IdempotentEndpointInterceptor;
import dev.idempotency.spring.web.IdempotentEndpoints;
import dev.idempotency.spring.web.SendContextArgumentResolver;
import jakarta.servlet.DispatcherType;
import java.time.Duration;
import java.util.EnumSet;
import java.util.List;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.config.BeanDefinition;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnWebApplication;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.boot.web.servlet.ServletListenerRegistrationBean;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.context.annotation.Role;
import org.springframework.core.Ordered;
import org.springframework.util.function.SingletonSupplier;
import org.springframework.web.method.support.HandlerMethodArgumentResolver;
import org.springframework.web.servlet.DispatcherServlet;
import org.springframework.web.servlet.config.annotation.InterceptorRegistry;
import org.springframework.web.servlet.config.annotation.WebMvcConfigurer;

/**
 * Auto-configuration of {@link dev.idempotency.spring.web.IdempotentEndpoint} for Spring MVC: the
 * {@link IdempotentEndpointInterceptor} that claims a request once its handler is chosen, the
 * {@link IdempotentEndpointAdvisor} that sees the handler start, the {@link AsyncWorkShield} that
 * keeps Spring MVC's interrupt at a timeout from its async work, and the {@link
 * IdempotentEndpointFilter} (late in the filter chain, after security) that follows the request
 * through its async and error dispatches to the response its client gets; and the {@link
 * IdempotencyExceptionHandler} for {@code @Idempotent} methods' refusals, defined once for both
 * stacks ({@code IdempotencyProblemDetailsConfiguration}).
 */
@AutoConfiguration(
    after = IdempotencyAutoConfiguration.class,
    afterName = {
      "org.springframework.boot.autoconfigure.web.servlet.WebMvcAutoConfiguration",
      "org.springframework.boot.webmvc.autoconfigure.WebMvcAutoConfiguration"
    })
@ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.SERVLET)
@ConditionalOnClass(DispatcherServlet.class)
@ConditionalOnBean(IdempotencyGuard.class)
@Import({
  IdempotencyAutoConfiguration.IdempotentMethodsConfiguration.AutoProxy.class,
  IdempotencyProblemDetailsConfiguration.class
})
public final class IdempotencyWebMvcAutoConfiguration {

  /** The filter's order: after every ordered filter of the application and of Spring Security. */
  public static final int FILTER_ORDER = Ordered.LOWEST_PRECEDENCE - 10;

  /** How long a request waits for the guard's answer past the in-flight wait. */
  private static final Duration WAIT_MARGIN = Duration.ofMinutes(1);

  /** Created by Spring Boot. */
  public IdempotencyWebMvcAutoConfiguration() {}

  /**
   * The filter, registered for the request, async and error dispatches.
   *
   * @param properties the properties
   * @return the registration
   */
  @Bean
  @ConditionalOnMissingBean(name = "idempotentEndpointFilter")
  public FilterRegistrationBean<IdempotentEndpointFilter> idempotentEndpointFilter(
      IdempotencyProperties properties) {
    IdempotentEndpointFilter filter =
        new IdempotentEndpointFilter(properties.getHttp().getMaxResponseSize().toBytes());
    FilterRegistrationBean<IdempotentEndpointFilter> registration =
        new FilterRegistrationBean<>(filter);
    registration.setName("idempotentEndpointFilter");
    registration.setOrder(FILTER_ORDER);
    registration.setDispatcherTypes(
        EnumSet.of(DispatcherType.REQUEST, DispatcherType.ASYNC, DispatcherType.ERROR));
    return registration;
  }

  /**
   * The filter as a request listener: a claimed request that ends without a final response (the
   * container wrote its own error page) releases its key.
   *
   * @param filter the filter's registration
   * @return the listener's registration
   */
  @Bean
  @ConditionalOnMissingBean(name = "idempotentEndpointRequestListener")
  public ServletListenerRegistrationBean<IdempotentEndpointFilter>
      idempotentEndpointRequestListener(FilterRegistrationBean<IdempotentEndpointFilter> filter) {
    return new ServletListenerRegistrationBean<>(filter.getFilter());
  }

  /**
   * The annotated handler methods, checked when the application has started.
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
   * Sees the handler methods start: an infrastructure advisor, applied by the auto-proxy creator.
   * It shields the async work a handler returns where its declared type allows, for a return value
   * handler that the {@link AsyncWorkShield} has not wrapped.
   *
   * @param shield the shield, looked up once, when a guarded handler first returns
   * @return the advisor
   */
  @Bean
  @Role(BeanDefinition.ROLE_INFRASTRUCTURE)
  @ConditionalOnMissingBean
  public static IdempotentEndpointAdvisor idempotentEndpointAdvisor(
      ObjectProvider<AsyncWorkShield> shield) {
    return new IdempotentEndpointAdvisor(SingletonSupplier.of(shield::getIfAvailable));
  }

  /**
   * Shields an endpoint's async work from Spring MVC's interrupt at a container timeout, where
   * Spring MVC hands it to its async executor: an infrastructure bean post-processor.
   *
   * @return the shield
   */
  @Bean
  @Role(BeanDefinition.ROLE_INFRASTRUCTURE)
  @ConditionalOnMissingBean
  public static AsyncWorkShield idempotentEndpointAsyncWorkShield() {
    return new AsyncWorkShield();
  }

  /**
   * Keys scoped to the authenticated user, unless the application defines its own scope.
   *
   * @return the scope
   */
  @Bean
  @ConditionalOnMissingBean
  public IdempotencyKeyScope idempotencyKeyScope() {
    return IdempotencyKeyScope.principal();
  }

  /**
   * The interceptor that claims, replays and refuses.
   *
   * @param guards the guards of the context's hierarchy (the closest context's is used)
   * @param beanFactory the context's beans, where the closest guard is looked for
   * @param endpoints the annotated handler methods
   * @param scope who a request comes from
   * @param json the application's JSON codecs, for fingerprints of JSON bodies
   * @param properties the properties
   * @return the interceptor
   */
  @Bean
  @ConditionalOnMissingBean
  public IdempotentEndpointInterceptor idempotentEndpointInterceptor(
      ObjectProvider<IdempotencyGuard> guards,
      org.springframework.beans.factory.ListableBeanFactory beanFactory,
      IdempotentEndpoints endpoints,
      IdempotencyKeyScope scope,
      ObjectProvider<JsonCodecs> json,
      IdempotencyProperties properties) {
    IdempotencyProperties.Http http = properties.getHttp();
    return new IdempotentEndpointInterceptor(
        ClosestGuard.of(beanFactory, guards).get(),
        endpoints,
        scope,
        SingletonSupplier.of(json::getIfAvailable), // looked up once, not on every request
        http.getHeader(),
        http.getMinKeyLength(),
        http.getMaxBodySize().toBytes(),
        properties.getInFlightWait().plus(WAIT_MARGIN));
  }

  /**
   * Adds the interceptor, after the application's own, and lets handler methods take a {@link
   * dev.idempotency.SendContext} parameter.
   *
   * @param interceptor the interceptor
   * @return the configurer
   */
  @Bean
  @ConditionalOnMissingBean(name = "idempotencyWebMvcConfigurer")
  public WebMvcConfigurer idempotencyWebMvcConfigurer(IdempotentEndpointInterceptor interceptor) {
    return new WebMvcConfigurer() {
      @Override
      public void addInterceptors(InterceptorRegistry registry) {
        registry.addInterceptor(interceptor).order(Ordered.LOWEST_PRECEDENCE);
      }

      @Override
      public void addArgumentResolvers(List<HandlerMethodArgumentResolver> resolvers) {
        resolvers.add(new SendContextArgumentResolver());
      }
    };
  }
}
