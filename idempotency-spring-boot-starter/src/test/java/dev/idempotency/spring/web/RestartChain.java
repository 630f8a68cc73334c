package dev.idempotency.spring.web;

import java.util.concurrent.CountDownLatch;
import java.util.function.Function;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;
import org.springframework.context.ApplicationEvent;
import org.springframework.context.ApplicationListener;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.event.ContextClosedEvent;

/**
 * The applications of a shutdown probe class whose rows each start an application, shut it down
 * while a send runs, and start it again on the same store for the retry: the application started
 * again is kept, once its row is done with it, as the next row's first application when that row
 * starts one alike (the same {@code kind}, such as the store): one start less a row (about 10 s on
 * a busy machine). That application has served the previous row's retry, on keys of its own. The
 * last one kept is closed after the class ({@link #close}). Used by one test at a time.
 */
final class RestartChain implements AutoCloseable {

  private @Nullable ConfigurableApplicationContext kept;
  private @Nullable Object keptKind;

  /**
   * A row's first application, {@code closing} counted down when its shutdown begins: the one kept
   * if it is of {@code kind}, else a new one from {@code start} (given {@code closing}).
   */
  ConfigurableApplicationContext first(
      Object kind,
      CountDownLatch closing,
      Function<CountDownLatch, ConfigurableApplicationContext> start) {
    ConfigurableApplicationContext application = kept;
    boolean alike = kind.equals(keptKind);
    kept = null;
    keptKind = null;
    if (application != null && alike && application.isActive()) {
      application.addApplicationListener(
          (ApplicationListener<ApplicationEvent>)
              event -> {
                if (event instanceof ContextClosedEvent) {
                  closing.countDown();
                }
              });
      return application;
    }
    if (application != null) {
      application.close();
    }
    return start.apply(closing);
  }

  /** A row's application started again ({@code start}), kept for the next row of {@code kind}. */
  ConfigurableApplicationContext again(
      Object kind, Supplier<ConfigurableApplicationContext> start) {
    close();
    ConfigurableApplicationContext application = start.get();
    kept = application;
    keptKind = kind;
    return application;
  }

  /** Closes the application kept, if any. */
  @Override
  public void close() {
    ConfigurableApplicationContext application = kept;
    kept = null;
    keptKind = null;
    if (application != null) {
      application.close();
    }
  }
}
