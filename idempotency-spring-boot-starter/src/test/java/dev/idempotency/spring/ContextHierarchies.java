package dev.idempotency.spring;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.springframework.boot.test.context.assertj.AssertableApplicationContext;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.NestedExceptionUtils;

/**
 * The set-up shared by the tests of child contexts ({@link ContextHierarchyTest}, {@link
 * ContextHierarchyProbeTest}): a parent and a child each started by an {@link
 * ApplicationContextRunner} with the starter ({@link DefaultNameClashes#runner()}), or a plain
 * child (no auto-configuration), and the beans both tests send with, which record their sends in
 * {@link #SENT}.
 */
final class ContextHierarchies {

  /** Every send, as {@code side:key}; cleared before each test. */
  static final List<String> SENT = new CopyOnWriteArrayList<>();

  private ContextHierarchies() {}

  /** What a test does with a parent and its child. */
  @FunctionalInterface
  interface ParentAndChild<C> {
    void accept(AssertableApplicationContext parent, C child) throws Throwable;
  }

  /** The parent's mailer; default name {@code Mailer.send}. */
  static class ParentSide {
    static class Mailer {
      @Idempotent(key = "#orderId")
      public String send(String orderId) {
        SENT.add("parent:" + orderId);
        return "parent-receipt-" + orderId;
      }
    }
  }

  /** The child's mailer: another class (another message), the same default name. */
  static class ChildSide {
    static class Mailer {
      @Idempotent(key = "#orderId")
      public String send(String orderId) {
        SENT.add("child:" + orderId);
        return "child-receipt-" + orderId;
      }
    }
  }

  /** The child's own operation, {@code Notifier.notify}: no name shared with the parent. */
  static class Notifier {
    @Idempotent(key = "#orderId")
    public String notify(String orderId) {
      SENT.add("notifier:" + orderId);
      return "notified-" + orderId;
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class ParentConfig {
    @Bean
    ParentSide.Mailer parentMailer() {
      return new ParentSide.Mailer();
    }
  }

  /**
   * Starts the parent with {@code parent}, checks that it started, then a child of it with the
   * starter and {@code childConfiguration}, started or not, and hands both to {@code test}.
   */
  static void withChild(
      ApplicationContextRunner parent,
      Class<?> childConfiguration,
      ParentAndChild<AssertableApplicationContext> test) {
    parent.run(
        started -> {
          assertThat(started).hasNotFailed();
          DefaultNameClashes.runner()
              .withParent(started.getSourceApplicationContext())
              .withUserConfiguration(childConfiguration)
              .run(child -> test.accept(started, child));
        });
  }

  /**
   * Starts the parent with {@code parent}, checks that it started, and hands {@code test} a plain
   * child of it (no auto-configuration) with {@code configuration} registered, not yet refreshed;
   * closes the child afterwards.
   */
  static void withPlainChild(
      ApplicationContextRunner parent,
      Class<?> configuration,
      ParentAndChild<AnnotationConfigApplicationContext> test) {
    parent.run(
        started -> {
          assertThat(started).hasNotFailed();
          try (AnnotationConfigApplicationContext child =
              new AnnotationConfigApplicationContext()) {
            child.setParent(started.getSourceApplicationContext());
            child.register(configuration);
            test.accept(started, child);
          }
        });
  }

  /** Checks that {@code child} failed to start, saying all of {@code messageParts}. */
  static void assertStartFailed(AssertableApplicationContext child, String... messageParts) {
    assertThat(child).hasFailed();
    assertThat(NestedExceptionUtils.getMostSpecificCause(child.getStartupFailure()))
        .hasMessageContainingAll(messageParts);
  }
}
