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
   * An application of the suite to start: {@code application} on {@code store} and {@code
   * provider}, with {@code closing} counted down when its shutdown begins.
   */
  static Launch application(
      Class<?> application,
      SwitchableKeyStore store,
      SuiteProvider provider,
      CountDownLatch closing) {
    return new Launch(application, store, provider, closing);
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

  /**
   * The one way the suite starts an application: its sources, its properties, then {@link #run}.
   */
  static final class Launch {

    private final SpringApplicationBuilder builder;
    private String[] arguments = new String[0];

    private Launch(
        Class<?> application,
        SwitchableKeyStore store,
        SuiteProvider provider,
        CountDownLatch closing) {
      builder =
          new SpringApplicationBuilder(application)
              .listeners((ApplicationListener<ContextClosedEvent>) closed -> closing.countDown())
              .initializers(
                  context -> {
                    context.getBeanFactory().registerSingleton("switchableKeyStore", store);
                    context.getBeanFactory().registerSingleton("suiteProvider", provider);
                  });
    }

    /** Adds {@code sources} to the application (probes' own beans). */
    Launch sources(Class<?>... sources) {
      builder.sources(sources);
      return this;
    }

    /**
     * Sets {@code properties} as the application's default properties, which the test resources'
     * {@code application.properties} outranks.
     */
    Launch defaultProperties(String... properties) {
      builder.properties(properties);
      return this;
    }

    /**
     * Sets {@code properties} as command-line arguments, which outrank the test resources' {@code
     * application.properties}.
     */
    Launch arguments(String... properties) {
      arguments = Arrays.stream(properties).map(property -> "--" + property).toArray(String[]::new);
      return this;
    }

    /** Starts the application. */
    ConfigurableApplicationContext run() {
      return builder.run(arguments);
    }
  }
}
