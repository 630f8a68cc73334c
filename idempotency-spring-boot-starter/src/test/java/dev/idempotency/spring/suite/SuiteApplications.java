package dev.idempotency.spring.suite;

import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ApplicationListener;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.event.ContextClosedEvent;

/**
 * How the suite starts its applications: on the test's store and provider, registered as the beans
 * the application would otherwise make itself ({@link SuiteBeans}), with {@code closing} counted
 * down when the application's shutdown begins.
 */
final class SuiteApplications {

  private SuiteApplications() {}

  /**
   * Starts {@code application} with {@code properties} as its default properties (which the test
   * resources' {@code application.properties} outranks).
   */
  static ConfigurableApplicationContext start(
      Class<?> application,
      SwitchableKeyStore store,
      SuiteProvider provider,
      CountDownLatch closing,
      String... properties) {
    return start(application, new Class<?>[0], store, provider, closing, properties);
  }

  /** Starts {@code application} with {@code sources} added to it (probes' own beans). */
  static ConfigurableApplicationContext start(
      Class<?> application,
      Class<?>[] sources,
      SwitchableKeyStore store,
      SuiteProvider provider,
      CountDownLatch closing,
      String... properties) {
    return builder(application, store, provider, closing)
        .sources(sources)
        .properties(properties)
        .run();
  }

  /**
   * Starts {@code application} with {@code properties} as command-line arguments, which outrank the
   * test resources' {@code application.properties}.
   */
  static ConfigurableApplicationContext startWithArguments(
      Class<?> application,
      SwitchableKeyStore store,
      SuiteProvider provider,
      CountDownLatch closing,
      String... properties) {
    return startWithArguments(application, new Class<?>[0], store, provider, closing, properties);
  }

  /** As {@link #startWithArguments}, with {@code sources} added to the application. */
  static ConfigurableApplicationContext startWithArguments(
      Class<?> application,
      Class<?>[] sources,
      SwitchableKeyStore store,
      SuiteProvider provider,
      CountDownLatch closing,
      String... properties) {
    return builder(application, store, provider, closing)
        .sources(sources)
        .run(Arrays.stream(properties).map(property -> "--" + property).toArray(String[]::new));
  }

  /**
   * A listener application's properties: the messaging tests' ({@link
   * ListenerTestConfiguration#PROPERTIES}), no web server, then its own, the suite's lease and
   * quiet logs.
   */
  static String[] listenerProperties(String... own) {
    return listenerProperties(own, new String[0]);
  }

  /** As {@link #listenerProperties(String...)}, then {@code extra} (a probe's), last. */
  static String[] listenerProperties(String[] own, String[] extra) {
    List<String> properties = new ArrayList<>(List.of(ListenerTestConfiguration.PROPERTIES));
    properties.add("spring.main.web-application-type=none");
    properties.addAll(List.of(own));
    properties.add("idempotency.lease=" + Stack.LEASE.toMillis() + "ms");
    properties.add("logging.level.dev.idempotency=WARN");
    properties.addAll(List.of(extra));
    return properties.toArray(String[]::new);
  }

  private static SpringApplicationBuilder builder(
      Class<?> application,
      SwitchableKeyStore store,
      SuiteProvider provider,
      CountDownLatch closing) {
    return new SpringApplicationBuilder(application)
        .listeners((ApplicationListener<ContextClosedEvent>) closed -> closing.countDown())
        .initializers(
            context -> {
              context.getBeanFactory().registerSingleton("switchableKeyStore", store);
              context.getBeanFactory().registerSingleton("suiteProvider", provider);
            });
  }
}
