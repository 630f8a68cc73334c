package dev.idempotency.spring.reactive;

import org.springframework.core.Ordered;
import org.springframework.http.server.reactive.HttpHandler;
import org.springframework.test.annotation.DirtiesContext.HierarchyMode;
import org.springframework.test.context.TestContext;
import org.springframework.test.context.TestExecutionListener;

/**
 * Closes a test class's reactive web application (a WebFlux {@code @SpringBootTest}: one with an
 * {@link HttpHandler}, as Boot's WebFlux auto-configuration makes) when the class ends, as
 * {@code @DirtiesContext} would, instead of when the test JVM exits: its shutdown then runs inside
 * the class, where {@link BlockHoundCheckEveryClass} fails the class on a blocking call of the SDK
 * on a non-blocking thread during it. Registered in {@code META-INF/spring.factories} of the test
 * resources. The reactive applications of these tests are each a class's own (their properties
 * differ), so none is loaded twice for it. First in order, so that its {@code afterTestClass} runs
 * after the other listeners' (Spring runs them in reverse), which may still use the application.
 */
public final class CloseReactiveApplicationAfterClass implements TestExecutionListener, Ordered {

  /** Called by Spring's {@code SpringFactoriesLoader}. */
  public CloseReactiveApplicationAfterClass() {}

  @Override
  public int getOrder() {
    return Ordered.HIGHEST_PRECEDENCE;
  }

  @Override
  public void afterTestClass(TestContext testContext) {
    if (testContext.hasApplicationContext()
        && testContext.getApplicationContext().getBeanNamesForType(HttpHandler.class).length > 0) {
      testContext.markApplicationContextDirty(HierarchyMode.EXHAUSTIVE);
    }
  }
}
