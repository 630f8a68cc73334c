package dev.idempotency.spring.reactive;

import org.springframework.beans.factory.support.BeanDefinitionRegistry;
import org.springframework.beans.factory.support.RootBeanDefinition;
import org.springframework.context.annotation.ImportBeanDefinitionRegistrar;
import org.springframework.core.type.AnnotationMetadata;
import org.springframework.util.ClassUtils;

/**
 * Makes a reactive test application serve on Reactor Netty even though Tomcat is on the test class
 * path (Boot prefers Tomcat): the Netty factory of whichever Boot line runs (its package moved in
 * Boot 4).
 */
public final class NettyServer implements ImportBeanDefinitionRegistrar {

  @Override
  public void registerBeanDefinitions(
      AnnotationMetadata metadata, BeanDefinitionRegistry registry) {
    ClassLoader loader = getClass().getClassLoader();
    for (String name :
        new String[] {
          "org.springframework.boot.reactor.netty.NettyReactiveWebServerFactory",
          "org.springframework.boot.web.embedded.netty.NettyReactiveWebServerFactory"
        }) {
      if (ClassUtils.isPresent(name, loader)) {
        registry.registerBeanDefinition(
            "nettyReactiveWebServerFactory",
            new RootBeanDefinition(ClassUtils.resolveClassName(name, loader)));
        return;
      }
    }
    throw new IllegalStateException("Reactor Netty's web server factory is not on the class path");
  }
}
