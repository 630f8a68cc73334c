package dev.idempotency.spring;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * Probe (issue 37, probeF; SPEC 13): {@code @Idempotent} beans in a child {@code
 * ApplicationContext} whose parent runs the starter, as Spring Cloud-style context hierarchies
 * build them.
 *
 * <ul>
 *   <li>A child with the starter's auto-configuration too ({@code SpringApplicationBuilder.child}
 *       style): two classes with one default name, one in the parent and one in the child, must
 *       fail the start naming both (SPEC 13), or at least not share a key namespace: the child's
 *       {@code Mailer.send("42")} must not be answered with the parent's stored result.
 *   <li>A plain child context (no auto-configuration, as Spring Cloud's named child contexts are):
 *       an {@code @Idempotent} method there is either guarded or refused, not run twice for one
 *       key.
 * </ul>
 */
@Tag("open-finding")
class ContextHierarchyProbeTest {

  static final List<String> SENT = new CopyOnWriteArrayList<>();

  final ApplicationContextRunner runner = DefaultNameClashes.runner();

  @BeforeEach
  void clear() {
    SENT.clear();
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

  /** The child's mailer: another class, the same default name {@code Mailer.send}. */
  static class ChildSide {
    static class Mailer {
      @Idempotent(key = "#orderId")
      public String send(String orderId) {
        SENT.add("child:" + orderId);
        return "child-receipt-" + orderId;
      }
    }
  }

  /** A listener bean, its method called as a container calls it (no broker needed here). */
  static class EventListener {
    final String side;

    EventListener(String side) {
      this.side = side;
    }

    @dev.idempotency.spring.messaging.IdempotentListener(name = "probe-events", key = "#event")
    public void onEvent(String event) {
      SENT.add(side + ":" + event);
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class ParentListenerConfig {
    @Bean
    EventListener parentListener() {
      return new EventListener("parent");
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class ChildListenerConfig {
    @Bean
    EventListener childListener() {
      return new EventListener("child");
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class ParentConfig {
    @Bean
    ParentSide.Mailer parentMailer() {
      return new ParentSide.Mailer();
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class ChildConfig {
    @Bean
    ChildSide.Mailer childMailer() {
      return new ChildSide.Mailer();
    }
  }

  @Test
  void aChildContextWithTheStarterGuardsItsMethodsOrRefusesTheSharedName() {
    runner
        .withUserConfiguration(ParentConfig.class)
        .run(
            parent -> {
              assertThat(parent).hasNotFailed();
              runner
                  .withParent(parent)
                  .withUserConfiguration(ChildConfig.class)
                  .run(
                      child -> {
                        if (child.getStartupFailure() != null) {
                          return; // refused: held
                        }
                        String fromParent = parent.getBean(ParentSide.Mailer.class).send("42");
                        ChildSide.Mailer childMailer = child.getBean(ChildSide.Mailer.class);
                        String fromChild = childMailer.send("42");
                        String childAgain = childMailer.send("42");
                        assertThat(fromParent).isEqualTo("parent-receipt-42");
                        assertThat(fromChild).isEqualTo("child-receipt-42");
                        assertThat(childAgain).isEqualTo("child-receipt-42");
                        assertThat(SENT)
                            .as(
                                "parent Mailer.send(42) once, then the child's Mailer.send(42)"
                                    + " twice (both classes have the default name Mailer.send;"
                                    + " the child is a proxy: %s)",
                                org.springframework.aop.support.AopUtils.isAopProxy(childMailer))
                            .containsExactly("parent:42", "child:42");
                      });
            });
  }

  @Test
  void anIdempotentMethodOfAPlainChildContextIsGuardedOrRefused() {
    runner.run(
        parent -> {
          assertThat(parent).hasNotFailed();
          AnnotationConfigApplicationContext child = new AnnotationConfigApplicationContext();
          child.setParent(parent.getSourceApplicationContext());
          child.register(ChildConfig.class);
          try {
            child.refresh();
          } catch (RuntimeException refused) {
            return; // refused at its start: held
          }
          try {
            ChildSide.Mailer mailer = child.getBean(ChildSide.Mailer.class);
            String first = mailer.send("7");
            String second = mailer.send("7");
            assertThat(SENT)
                .as(
                    "one key, two calls of a child context's @Idempotent method (%s, %s)",
                    first, second)
                .containsExactly("child:7");
          } finally {
            child.close();
          }
        });
  }

  @Test
  void anIdempotentListenerOfAChildContextWithTheStarterIsGuarded() {
    runner
        .withUserConfiguration(ParentListenerConfig.class)
        .run(
            parent -> {
              assertThat(parent).hasNotFailed();
              EventListener inParent = parent.getBean(EventListener.class);
              inParent.onEvent("p1");
              inParent.onEvent("p1");
              assertThat(SENT).as("control: the parent's listener").containsExactly("parent:p1");
              runner
                  .withParent(parent)
                  .withUserConfiguration(ChildListenerConfig.class)
                  .run(
                      child -> {
                        assertThat(child).hasNotFailed();
                        EventListener inChild = child.getBean("childListener", EventListener.class);
                        inChild.onEvent("c1");
                        inChild.onEvent("c1");
                        assertThat(SENT)
                            .as(
                                "one event key delivered twice to the child's listener (a proxy:"
                                    + " %s)",
                                org.springframework.aop.support.AopUtils.isAopProxy(inChild))
                            .containsExactly("parent:p1", "child:c1");
                      });
            });
  }
}
