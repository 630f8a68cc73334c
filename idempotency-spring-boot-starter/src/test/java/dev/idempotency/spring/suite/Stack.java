package dev.idempotency.spring.suite;

import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.util.concurrent.CountDownLatch;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * A web stack of the suite: its application, started once per test JVM and shared by every hazard
 * (one store and one provider for both stacks, a new key per call), or started afresh on a store
 * and provider of the test's own where the hazard ends the application (a shutdown).
 */
public enum Stack {
  /** Spring MVC on Tomcat. */
  MVC(SuiteApplication.class, "servlet"),
  /** Spring WebFlux on Reactor Netty. */
  WEBFLUX(SuiteWebFluxApplication.class, "reactive");

  /** The lease of the suite's applications: short, so that a lapsed one costs little time. */
  public static final java.time.Duration LEASE = java.time.Duration.ofSeconds(2);

  /** The store every shared application uses. */
  public static final SwitchableKeyStore STORE = new SwitchableKeyStore();

  /** The provider every shared application sends through. */
  public static final SuiteProvider PROVIDER = new SuiteProvider();

  private final Class<?> application;
  private final String webApplicationType;
  private ConfigurableApplicationContext shared;

  Stack(Class<?> application, String webApplicationType) {
    this.application = application;
    this.webApplicationType = webApplicationType;
  }

  /** The port of this stack's shared application, started on first use (closed as the JVM ends). */
  public synchronized int sharedPort() {
    if (shared == null) {
      shared = start(STORE, PROVIDER, new CountDownLatch(1));
    }
    return port(shared);
  }

  /** This stack's shared application, started on first use. */
  public synchronized ConfigurableApplicationContext shared() {
    sharedPort();
    return shared;
  }

  /**
   * Starts this stack's application on {@code store} and {@code provider}; {@code closing} is
   * counted down when its shutdown begins.
   */
  public ConfigurableApplicationContext start(
      SwitchableKeyStore store, SuiteProvider provider, CountDownLatch closing) {
    return SuiteApplications.application(application, store, provider, closing)
        .defaultProperties(
            "spring.main.web-application-type=" + webApplicationType,
            "server.port=0",
            "server.shutdown=graceful",
            "spring.main.banner-mode=off",
            "idempotency.in-flight-wait=50ms",
            "idempotency.lease=" + LEASE.toMillis() + "ms",
            "logging.level.dev.idempotency=WARN")
        .run();
  }

  /** The port an application of the suite serves on. */
  public static int port(ConfigurableApplicationContext application) {
    return application.getEnvironment().getRequiredProperty("local.server.port", Integer.class);
  }
}
