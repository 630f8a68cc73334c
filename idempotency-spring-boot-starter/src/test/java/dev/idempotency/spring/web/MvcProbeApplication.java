package dev.idempotency.spring.web;

import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.TestInstance;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * One MVC application on a real Redis for a whole probe class, started before its first test and
 * closed after its last; its tests reach it over real HTTP through {@link EndpointClient}.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
abstract class MvcProbeApplication implements EndpointClient {

  private final Class<?> applicationClass;
  private final String[] properties;
  private ConfigurableApplicationContext application;
  private int port;

  /** {@code properties} are added to {@link MvcProbes#startOn}'s. */
  MvcProbeApplication(Class<?> applicationClass, String... properties) {
    this.applicationClass = applicationClass;
    this.properties = properties.clone();
  }

  @BeforeAll
  void startApplication() {
    application = MvcProbes.startOn(applicationClass, "redis", new CountDownLatch(1), properties);
    port = MvcProbes.portOf(application);
  }

  @AfterAll
  void stopApplication() {
    if (application != null) {
      application.close();
    }
  }

  @Override
  public int port() {
    return port;
  }
}
