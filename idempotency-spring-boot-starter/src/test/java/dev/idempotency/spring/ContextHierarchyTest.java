package dev.idempotency.spring;

import static dev.idempotency.spring.ContextHierarchies.SENT;
import static dev.idempotency.spring.ContextHierarchies.assertStartFailed;
import static dev.idempotency.spring.ContextHierarchies.withChild;
import static dev.idempotency.spring.ContextHierarchies.withPlainChild;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatIllegalStateException;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.spring.ContextHierarchies.ChildSide;
import dev.idempotency.spring.ContextHierarchies.Notifier;
import dev.idempotency.spring.ContextHierarchies.ParentConfig;
import dev.idempotency.spring.ContextHierarchies.ParentSide;
import dev.idempotency.spring.autoconfigure.IdempotencyAutoConfiguration;
import dev.idempotency.spring.autoconfigure.IdempotencyMessagingAutoConfiguration;
import dev.idempotency.spring.messaging.IdempotentListener;
import java.util.List;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.aop.support.AopUtils;
import org.springframework.boot.autoconfigure.ImportAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * {@code @Idempotent} and {@code @IdempotentListener} beans of a child {@code ApplicationContext}
 * whose parent runs the starter (issue 37, found by probeF; SPEC 13, 15): a child with the
 * starter's auto-configuration ({@code SpringApplicationBuilder.child}) guards its beans with its
 * own advisors on the parent's guard, and shares the parent's default names; a plain child (a
 * Spring Cloud named context) with such beans and no advisor fails its start instead of running
 * them unguarded.
 */
class ContextHierarchyTest {

  final ApplicationContextRunner runner = DefaultNameClashes.runner();

  @BeforeEach
  void clear() {
    SENT.clear();
  }

  /** A listener bean, its method called as a container calls it (no broker needed here). */
  static class EventListener {
    final String side;

    EventListener(String side) {
      this.side = side;
    }

    @IdempotentListener(name = "hierarchy-events", key = "#event")
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
  static class ChildConfig {
    @Bean
    ChildSide.Mailer childMailer() {
      return new ChildSide.Mailer();
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class ChildNotifierConfig {
    @Bean
    Notifier childNotifier() {
      return new Notifier();
    }
  }

  /** A plain child that asks for the guard, as docs/spring-boot.md says. */
  @Configuration(proxyBeanMethods = false)
  @ImportAutoConfiguration({
    IdempotencyAutoConfiguration.class,
    IdempotencyMessagingAutoConfiguration.class
  })
  static class GuardedPlainChildConfig {
    @Bean
    Notifier childNotifier() {
      return new Notifier();
    }
  }

  @Test
  void aChildContextWithTheStarterGuardsItsMethodsOnTheParentsGuard() {
    withChild(
        runner.withUserConfiguration(ParentConfig.class),
        ChildNotifierConfig.class,
        (parent, child) -> {
          assertThat(child).hasNotFailed();
          assertThat(child.getBean(IdempotencyGuard.class))
              .as("the child uses the parent's guard")
              .isSameAs(parent.getBean(IdempotencyGuard.class));
          for (String perContext :
              List.of(
                  "idempotencyKafkaContainerFactories",
                  "idempotencyRabbitContainerFactories",
                  "idempotencyJmsContainerFactories")) {
            assertThat(parent.containsLocalBean(perContext)).isTrue();
            assertThat(child.getSourceApplicationContext().containsLocalBean(perContext))
                .as("the child's own container-factory post-processor %s", perContext)
                .isTrue();
          }
          Notifier notifier = child.getBean(Notifier.class);
          assertThat(notifier.notify("42")).isEqualTo("notified-42");
          assertThat(notifier.notify("42")).isEqualTo("notified-42");
          assertThat(SENT)
              .as(
                  "one key, two calls (the child's bean a proxy: %s)",
                  AopUtils.isAopProxy(notifier))
              .containsExactly("notifier:42");
        });
  }

  /** A window of one minute: longer than the default lease (30 s), not than the parent's. */
  static class MinuteNotifier {
    @Idempotent(key = "#orderId", ttl = "1m")
    public String notify(String orderId) {
      return "notified-" + orderId;
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class ChildMinuteConfig {
    @Bean
    MinuteNotifier childMinuteNotifier() {
      return new MinuteNotifier();
    }
  }

  @Test
  void aChildsWindowIsCheckedAgainstTheLeaseOfTheParentsGuard() {
    withChild(
        runner.withPropertyValues("idempotency.lease=2m"),
        ChildMinuteConfig.class,
        (parent, child) ->
            // a 1m window on the parent's guard, whose lease is 2m
            assertStartFailed(child, "must be longer than the lease", "PT2M"));
  }

  @Test
  void aChildsDefaultNameThatItsParentHasAlreadyFailsTheChildsStart() {
    withChild(
        runner.withUserConfiguration(ParentConfig.class),
        ChildConfig.class,
        (parent, child) ->
            // Mailer.send in parent and child share the parent's guard
            assertStartFailed(
                child,
                ParentSide.Mailer.class.getName() + ".send(String)",
                ChildSide.Mailer.class.getName() + ".send(String)",
                "'Mailer.send'"));
  }

  @Test
  void anIdempotentMethodOfAPlainChildContextFailsItsStart() {
    withPlainChild(
        runner,
        ChildConfig.class,
        (parent, child) ->
            assertThatIllegalStateException()
                .isThrownBy(child::refresh)
                .withMessageContainingAll(
                    "'childMailer'",
                    ChildSide.Mailer.class.getName() + ".send(String)",
                    "no advisor",
                    "@ImportAutoConfiguration"));
    assertThat(SENT).isEmpty();
  }

  @Test
  void aPlainChildContextThatImportsTheAutoConfigurationIsGuarded() {
    withPlainChild(
        runner,
        GuardedPlainChildConfig.class,
        (parent, child) -> {
          child.refresh();
          assertThat(child.getBean(IdempotencyGuard.class))
              .isSameAs(parent.getBean(IdempotencyGuard.class));
          Notifier notifier = child.getBean(Notifier.class);
          notifier.notify("7");
          notifier.notify("7");
          assertThat(SENT)
              .as("one key, two calls (a proxy: %s)", AopUtils.isAopProxy(notifier))
              .containsExactly("notifier:7");
        });
  }

  @Test
  void anIdempotentListenerOfAChildContextWithTheStarterIsGuarded() {
    withChild(
        runner.withUserConfiguration(ParentListenerConfig.class),
        ChildListenerConfig.class,
        (parent, child) -> {
          assertThat(child).hasNotFailed();
          EventListener inParent = parent.getBean(EventListener.class);
          inParent.onEvent("p1");
          inParent.onEvent("p1");
          assertThat(SENT).as("control: the parent's listener").containsExactly("parent:p1");
          EventListener inChild = child.getBean("childListener", EventListener.class);
          inChild.onEvent("c1");
          inChild.onEvent("c1");
          assertThat(SENT)
              .as(
                  "one event key delivered twice to the child's listener (a proxy: %s)",
                  AopUtils.isAopProxy(inChild))
              .containsExactly("parent:p1", "child:c1");
        });
  }
}
