package dev.idempotency.spring.reactive;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.context.event.ApplicationContextInitializedEvent;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.support.GenericApplicationContext;

/**
 * No WebFlux application of the starter's tests starts without BlockHound installed ({@link
 * BlockHoundBeforeWebFlux}): the check is registered for every {@code SpringApplication} of these
 * tests (on Boot 3.5 and, in spring-boot-4-tests, Boot 4.0), BlockHound is installed in this JVM,
 * and the check throws, which fails the application's run before its context is refreshed, when a
 * reactive application's context is initialized and BlockHound is not installed. The check is
 * called with the event directly: a failed {@code SpringApplication} run costs about 10 s here (its
 * failure analysis), for what Spring guarantees (an exception of a listener fails the run).
 */
class BlockHoundBeforeWebFluxTest {

  @Test
  void everySpringApplicationOfTheseTestsChecksForBlockHoundAndItIsInstalled() {
    assertThat(new SpringApplication(Empty.class).getListeners())
        .as("the check is registered (META-INF/spring.factories of the test resources)")
        .hasAtLeastOneElementOfType(BlockHoundBeforeWebFlux.class);
    assertThat(BlockingCalls.installed())
        .as("BlockHound installed in this test JVM before any test")
        .isTrue();
    assertThatCode(() -> new BlockHoundBeforeWebFlux().onApplicationEvent(initialized(REACTIVE)))
        .as("the registered check lets a WebFlux application start here")
        .doesNotThrowAnyException();
  }

  @Test
  void aWebFluxApplicationDoesNotStartWithoutBlockHound() {
    BlockHoundBeforeWebFlux notInstalled = new BlockHoundBeforeWebFlux(() -> false);

    assertThatThrownBy(() -> notInstalled.onApplicationEvent(initialized(REACTIVE)))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("BlockHound is not installed in this test JVM")
        .hasMessageContaining("a WebFlux application starts");
  }

  @Test
  void anApplicationThatIsNotWebFluxStartsWithoutBlockHound() {
    BlockHoundBeforeWebFlux notInstalled = new BlockHoundBeforeWebFlux(() -> false);

    for (WebApplicationType type : new WebApplicationType[] {SERVLET, NONE}) {
      assertThatCode(() -> notInstalled.onApplicationEvent(initialized(type)))
          .as(type + " application")
          .doesNotThrowAnyException();
    }
  }

  private static final WebApplicationType REACTIVE = WebApplicationType.REACTIVE;
  private static final WebApplicationType SERVLET = WebApplicationType.SERVLET;
  private static final WebApplicationType NONE = WebApplicationType.NONE;

  /** What a {@code SpringApplication} of this type publishes once its context is initialized. */
  private static ApplicationContextInitializedEvent initialized(WebApplicationType type) {
    SpringApplication application = new SpringApplication(Empty.class);
    application.setWebApplicationType(type);
    return new ApplicationContextInitializedEvent(
        application, new String[0], new GenericApplicationContext());
  }

  @Configuration(proxyBeanMethods = false)
  static class Empty {}
}
