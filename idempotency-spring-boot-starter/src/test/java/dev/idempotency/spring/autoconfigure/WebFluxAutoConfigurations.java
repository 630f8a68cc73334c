package dev.idempotency.spring.autoconfigure;

import java.util.Arrays;
import org.springframework.context.annotation.DeferredImportSelector;
import org.springframework.core.type.AnnotationMetadata;
import org.springframework.util.ClassUtils;

/**
 * The few auto-configurations of a WebFlux application on Reactor Netty with the starter, by name
 * on either Boot line, in the order they apply: for tests that start many small applications and
 * need neither a database nor a broker. Import it with
 * {@code @Import(WebFluxAutoConfigurations.class)} (with {@code NettyServer}, so that Boot 3.5 does
 * not pick Tomcat from the test class path).
 */
public final class WebFluxAutoConfigurations implements DeferredImportSelector {

  private static final String[] IN_ORDER = {
    "org.springframework.boot.autoconfigure.context.PropertyPlaceholderAutoConfiguration",
    // Boot 4.0, then Boot 3.5, for each
    "org.springframework.boot.jackson.autoconfigure.JacksonAutoConfiguration",
    "org.springframework.boot.autoconfigure.jackson.JacksonAutoConfiguration",
    "org.springframework.boot.http.codec.autoconfigure.CodecsAutoConfiguration",
    "org.springframework.boot.autoconfigure.http.codec.CodecsAutoConfiguration",
    "org.springframework.boot.reactor.netty.autoconfigure.NettyReactiveWebServerAutoConfiguration",
    "org.springframework.boot.autoconfigure.web.reactive.ReactiveWebServerFactoryAutoConfiguration",
    "org.springframework.boot.webflux.autoconfigure.WebFluxAutoConfiguration",
    "org.springframework.boot.autoconfigure.web.reactive.WebFluxAutoConfiguration",
    "org.springframework.boot.webflux.autoconfigure.HttpHandlerAutoConfiguration",
    "org.springframework.boot.autoconfigure.web.reactive.HttpHandlerAutoConfiguration",
    IdempotencyAutoConfiguration.class.getName(),
    IdempotencyWebFluxAutoConfiguration.class.getName()
  };

  @Override
  public String[] selectImports(AnnotationMetadata metadata) {
    ClassLoader loader = getClass().getClassLoader();
    return Arrays.stream(IN_ORDER)
        .filter(name -> ClassUtils.isPresent(name, loader))
        .toArray(String[]::new);
  }
}
