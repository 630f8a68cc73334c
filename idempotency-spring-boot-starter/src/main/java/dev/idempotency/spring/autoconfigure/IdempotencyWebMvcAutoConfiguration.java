package dev.idempotency.spring.autoconfigure;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.spring.JsonCodecs;
import dev.idempotency.spring.web.IdempotentEndpointFilter;
import dev.idempotency.spring.web.SendContextArgumentResolver;
import java.util.List;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnWebApplication;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.context.annotation.Bean;
import org.springframework.core.Ordered;
import org.springframework.web.method.support.HandlerMethodArgumentResolver;
import org.springframework.web.servlet.DispatcherServlet;
import org.springframework.web.servlet.config.annotation.WebMvcConfigurer;
import org.springframework.web.servlet.mvc.method.annotation.RequestMappingHandlerMapping;

/**
 * Auto-configuration of {@link dev.idempotency.spring.web.IdempotentEndpoint} for Spring MVC: the
 * {@link IdempotentEndpointFilter}, late in the filter chain (after security), on every request.
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
public final class IdempotencyWebMvcAutoConfiguration {

  /** The filter's order: after every ordered filter of the application and of Spring Security. */
  public static final int FILTER_ORDER = Ordered.LOWEST_PRECEDENCE - 10;

  /** Created by Spring Boot. */
  public IdempotencyWebMvcAutoConfiguration() {}

  /**
   * The filter, registered for every request.
   *
   * @param guard the guard
   * @param handlerMappings the application's request mappings, looked up on the first request
   * @param json the application's JSON codecs, for fingerprints of JSON bodies
   * @param properties the properties
   * @return the registration
   */
  @Bean
  @ConditionalOnMissingBean(name = "idempotentEndpointFilter")
  public FilterRegistrationBean<IdempotentEndpointFilter> idempotentEndpointFilter(
      IdempotencyGuard guard,
      ObjectProvider<RequestMappingHandlerMapping> handlerMappings,
      ObjectProvider<JsonCodecs> json,
      IdempotencyProperties properties) {
    IdempotentEndpointFilter filter =
        new IdempotentEndpointFilter(
            guard,
            () -> List.copyOf(handlerMappings.orderedStream().toList()),
            json::getIfAvailable,
            properties.getHttp().getHeader(),
            properties.getHttp().getMaxBodySize().toBytes(),
            properties::getDefaultTtl);
    FilterRegistrationBean<IdempotentEndpointFilter> registration =
        new FilterRegistrationBean<>(filter);
    registration.setName("idempotentEndpointFilter");
    registration.setOrder(FILTER_ORDER);
    return registration;
  }

  /**
   * Lets handler methods take a {@link dev.idempotency.SendContext} parameter.
   *
   * @return the configurer
   */
  @Bean
  @ConditionalOnMissingBean(name = "idempotencyWebMvcConfigurer")
  public WebMvcConfigurer idempotencyWebMvcConfigurer() {
    return new WebMvcConfigurer() {
      @Override
      public void addArgumentResolvers(List<HandlerMethodArgumentResolver> resolvers) {
        resolvers.add(new SendContextArgumentResolver());
      }
    };
  }
}
