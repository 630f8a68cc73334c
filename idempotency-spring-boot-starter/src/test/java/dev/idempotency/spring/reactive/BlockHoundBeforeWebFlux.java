package dev.idempotency.spring.reactive;

import java.util.function.BooleanSupplier;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.context.event.ApplicationContextInitializedEvent;
import org.springframework.context.ApplicationListener;

/**
 * Fails the start of a reactive Spring Boot application (a WebFlux application: {@link
 * WebApplicationType#REACTIVE}) in a test JVM where BlockHound is not installed ({@link
 * BlockingCalls#installed()}), before its context is refreshed. Registered for every {@code
 * SpringApplication} in {@code META-INF/spring.factories} of the test resources, for the starter's
 * tests and their re-run on Boot 4.0.
 *
 * <p>{@link BlockHoundForEveryTest} installs BlockHound when the test plan starts; if that fails (a
 * module re-running these tests without {@code -XX:+AllowRedefinitionToAddDeleteMethods}, a
 * BlockHound that does not support the JVM), the launcher only logs the listener's exception, and
 * every WebFlux test would pass with nothing watching for blocking calls. Applications started
 * without a {@code SpringApplication} (an {@code ApplicationContextRunner}) are not seen.
 */
public final class BlockHoundBeforeWebFlux
    implements ApplicationListener<ApplicationContextInitializedEvent> {

  private final BooleanSupplier installed;

  /**
   * Called by Spring's {@code SpringFactoriesLoader}: BlockHound as {@link BlockingCalls} has it.
   */
  public BlockHoundBeforeWebFlux() {
    this(BlockingCalls::installed);
  }

  /**
   * With what says whether BlockHound is installed, for a test of the check itself.
   *
   * @param installed whether BlockHound is installed in this JVM
   */
  public BlockHoundBeforeWebFlux(BooleanSupplier installed) {
    this.installed = installed;
  }

  @Override
  public void onApplicationEvent(ApplicationContextInitializedEvent event) {
    if (event.getSpringApplication().getWebApplicationType() == WebApplicationType.REACTIVE
        && !installed.getAsBoolean()) {
      throw new IllegalStateException(
          "BlockHound is not installed in this test JVM, and a WebFlux application starts: its"
              + " blocking calls on event loops would go unseen. BlockHoundForEveryTest installs it"
              + " when the test plan starts (META-INF/services of the starter's test resources;"
              + " surefire's argLine needs -XX:+AllowRedefinitionToAddDeleteMethods); see the"
              + " launcher's warning for why it did not.");
    }
  }
}
