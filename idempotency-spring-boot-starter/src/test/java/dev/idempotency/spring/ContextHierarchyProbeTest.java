package dev.idempotency.spring;

import static dev.idempotency.spring.ContextHierarchies.SENT;
import static dev.idempotency.spring.ContextHierarchies.assertStartFailed;
import static dev.idempotency.spring.ContextHierarchies.withChild;
import static dev.idempotency.spring.ContextHierarchies.withPlainChild;
import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spring.ContextHierarchies.ChildSide;
import dev.idempotency.spring.ContextHierarchies.Notifier;
import dev.idempotency.spring.ContextHierarchies.ParentConfig;
import dev.idempotency.spring.ContextHierarchies.ParentSide;
import dev.idempotency.spring.messaging.IdempotentListener;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.SmartLifecycle;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Primary;

/**
 * probeS: attempts to break SPEC 1 (at most one send per key within its window; no lost send) with
 * child contexts of an application that runs the starter (issue 37, "fixhier"). No broker: the
 * beans are called as an application calls them.
 */
class ContextHierarchyProbeTest {

  final ApplicationContextRunner runner = DefaultNameClashes.runner();

  @BeforeEach
  void clear() {
    SENT.clear();
  }

  /**
   * A child with a guard of its own (its own lease, say) over the parent's store, {@code @Primary}
   * so that the child's own lookups prefer it to the parent's.
   */
  @Configuration(proxyBeanMethods = false)
  static class ChildWithOwnGuardConfig {
    @Bean
    @Primary
    IdempotencyGuard childGuard(KeyStore parentsStore) {
      return IdempotencyGuard.builder().store(parentsStore).build();
    }

    @Bean
    ChildSide.Mailer childMailer() {
      return new ChildSide.Mailer();
    }
  }

  /**
   * A child that defines its own guard got a default-name registry of its own
   * (DefaultOperationNames.sharedIn stopped at a context with a guard), but a guard over the
   * parent's store writes the same records: its {@code Mailer.send} and the parent's share one key
   * namespace. The child started, and its first send of order 42 was answered with the parent's
   * receipt: the child's message was never sent. Fixed (fixhier2): one registry per hierarchy, so
   * the child's start fails, as in the shared-guard case (ContextHierarchyTest).
   */
  @Test
  void aChildWithItsOwnGuardOnTheParentsStoreDoesNotShareTheParentsNamespaceUnnoticed() {
    runner
        .withUserConfiguration(ParentConfig.class)
        .run(
            parent -> {
              assertThat(parent).hasNotFailed();
              assertThat(parent.getBean(ParentSide.Mailer.class).send("42"))
                  .isEqualTo("parent-receipt-42");
              runner
                  .withParent(parent.getSourceApplicationContext())
                  .withUserConfiguration(ChildWithOwnGuardConfig.class)
                  .run(
                      child -> {
                        if (child.getStartupFailure() != null) {
                          // refused: what the shared-guard case does
                          assertStartFailed(child, "'Mailer.send'");
                          return;
                        }
                        String answer = child.getBean(ChildSide.Mailer.class).send("42");
                        assertThat(SENT)
                            .as(
                                "the child's first call of its own Mailer.send for order 42"
                                    + " (answered %s)",
                                answer)
                            .containsExactly("parent:42", "child:42");
                      });
            });
  }

  /** The same child, its guard not {@code @Primary}: what a child defining a guard writes first. */
  @Configuration(proxyBeanMethods = false)
  static class ChildWithOwnPlainGuardConfig {
    @Bean
    IdempotencyGuard childGuard(KeyStore parentsStore) {
      return IdempotencyGuard.builder().store(parentsStore).build();
    }

    @Bean
    Notifier childNotifier() {
      return new Notifier();
    }
  }

  /**
   * A child that defines its own guard starts (the starter's guard backs off, the advisors are the
   * child's own), but the child's advisor looks its guard up as an autowiring candidate, which
   * counts the parent's guard too: two candidates, none primary. Every call of the child's {@code
   * Idempotent} method then failed with NoUniqueBeanDefinitionException, at call time, not at the
   * start (SPEC 13: a misconfiguration the starter can see fails the start). Fixed (fixhier2): the
   * advisors and endpoints use the closest context's guard (ClosestGuard), the child's own. For an
   * {@code IdempotentListener} in such a child the same exception would be an ordinary listener
   * failure, not a deferral: a container's error handler retries it and then skips or dead-letters
   * the message (Spring Kafka's default: ten tries, then logged and skipped), with nothing sent
   * (not run on a broker here).
   */
  @Test
  void aChildWithItsOwnGuardEitherFailsItsStartOrUsesItsGuard() {
    withChild(
        runner,
        ChildWithOwnPlainGuardConfig.class,
        (parent, child) -> {
          if (child.getStartupFailure() != null) {
            return; // refused at the start: acceptable
          }
          Notifier notifier = child.getBean(Notifier.class);
          Throwable failure = null;
          try {
            notifier.notify("9");
          } catch (RuntimeException e) {
            failure = e;
          }
          assertThat(failure)
              .as("the first call of the started child's @Idempotent method")
              .isNull();
          assertThat(SENT).containsExactly("notifier:9");
        });
  }

  /** A child's listener, keyed by its event. */
  static class ChildEventListener {
    @IdempotentListener(name = "child-events", key = "#event")
    public void onEvent(String event) {
      SENT.add("child-event:" + event);
    }
  }

  /** A child with a guard of its own over a store of its own, not {@code @Primary}. */
  @Configuration(proxyBeanMethods = false)
  static class ChildWithOwnStoreGuardConfig {
    @Bean
    IdempotencyGuard childGuard() {
      return IdempotencyGuard.builder().store(InMemoryKeyStore.builder().build()).build();
    }

    @Bean
    ChildEventListener childEventListener() {
      return new ChildEventListener();
    }
  }

  /**
   * fixhier2: a child's {@code @IdempotentListener} runs on the child's own guard (the closest
   * context's), as its {@code @Idempotent} methods do, not on the parent's, and a repeat is not
   * handled again.
   */
  @Test
  void aChildsListenerUsesTheChildsOwnGuard() {
    withChild(
        runner,
        ChildWithOwnStoreGuardConfig.class,
        (parent, child) -> {
          assertThat(child).hasNotFailed();
          ChildEventListener listener = child.getBean(ChildEventListener.class);
          listener.onEvent("e1");
          listener.onEvent("e1");
          assertThat(SENT).containsExactly("child-event:e1");
          String key = IdempotencyKey.of("child-events", "e1");
          assertThat(child.getBean("childGuard", IdempotencyGuard.class).find(key))
              .as("the child's own guard's record")
              .isPresent();
          assertThat(parent.getBean(IdempotencyGuard.class).find(key))
              .as("the parent's guard's record")
              .isEmpty();
        });
  }

  /**
   * One class, configured per tenant (its SMS account, say); default name {@code
   * TenantMailer.send}.
   */
  static class TenantMailer {
    final String tenant;

    TenantMailer(String tenant) {
      this.tenant = tenant;
    }

    @Idempotent(key = "#orderId")
    public String send(String orderId) {
      SENT.add(tenant + ":" + orderId);
      return tenant + "-receipt-" + orderId;
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class TenantAConfig {
    @Bean
    TenantMailer mailer() {
      return new TenantMailer("a");
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class TenantBConfig {
    @Bean
    TenantMailer mailer() {
      return new TenantMailer("b");
    }
  }

  /** Two beans of one class in one context: refused (control, TwoBeansOfOneClassTest's rule). */
  @Configuration(proxyBeanMethods = false)
  static class TwoTenantsConfig {
    @Bean
    TenantMailer mailerA() {
      return new TenantMailer("a");
    }

    @Bean
    TenantMailer mailerB() {
      return new TenantMailer("b");
    }
  }

  @Test
  void controlTwoBeansOfOneClassInOneContextAreRefused() {
    DefaultNameClashes.assertStartFails(
        runner, TwoTenantsConfig.class, "'mailerA'", "'mailerB'", "TenantMailer");
  }

  /**
   * Two sibling children on the parent's guard (Spring Cloud's named contexts, one per tenant,
   * built from one configuration), each with its bean {@code mailer} of one class: in one context
   * the second bean of a class is refused (its default name is the class's: both would share one
   * key namespace); across siblings it is not (DefaultOperationNames.registerBean keys beans by
   * name, and the siblings' beans have one name), so tenant b's first send of order 42 was answered
   * with tenant a's receipt and never sent. Fixed (fixhier2): beans are told apart by context too,
   * in one registry per hierarchy, so tenant b's start fails.
   */
  @Test
  void siblingChildrenWithOneBeanClassDoNotShareOneNamespaceUnnoticed() {
    withChild(
        runner,
        TenantAConfig.class,
        (parent, a) -> {
          assertThat(a).hasNotFailed();
          a.getBean(TenantMailer.class).send("42");
          runner
              .withParent(parent.getSourceApplicationContext())
              .withUserConfiguration(TenantBConfig.class)
              .run(
                  b -> {
                    if (b.getStartupFailure() != null) {
                      // refused, as in one context, naming both beans and their class
                      assertStartFailed(b, "'mailer' (of", "TenantMailer", "same hierarchy");
                      return;
                    }
                    String answer = b.getBean(TenantMailer.class).send("42");
                    assertThat(SENT)
                        .as("tenant b's first send of order 42 (answered %s)", answer)
                        .containsExactly("a:42", "b:42");
                  });
        });
  }

  /**
   * A child closed and built again from the same configuration (a refresh of a named context): it
   * starts (its names are its own from before), and its bean is guarded on the parent's guard: a
   * repeat of a key the first child sent is a replay.
   */
  @Test
  void aChildClosedAndBuiltAgainStartsAndReplaysWhatItsPredecessorSent() {
    runner.run(
        parent -> {
          assertThat(parent).hasNotFailed();
          ApplicationContextRunner children =
              runner.withParent(parent.getSourceApplicationContext());
          List<String> answers = new ArrayList<>();
          for (int i = 0; i < 2; i++) {
            children
                .withUserConfiguration(TenantAConfig.class)
                .run(
                    child -> {
                      assertThat(child).hasNotFailed();
                      answers.add(child.getBean(TenantMailer.class).send("7"));
                    });
          }
          assertThat(answers).containsExactly("a-receipt-7", "a-receipt-7");
          assertThat(SENT).containsExactly("a:7");
        });
  }

  /** A listener with a window of one minute: longer than the default lease, not than 2m. */
  static class MinuteListener {
    @IdempotentListener(name = "minute-events", key = "#event", ttl = "1m")
    public void onEvent(String event) {
      SENT.add("minute:" + event);
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class ChildMinuteListenerConfig {
    @Bean
    MinuteListener childMinuteListener() {
      return new MinuteListener();
    }
  }

  /**
   * fab531e checked a child's {@code @Idempotent} window against its parent's guard's lease (its
   * test covers methods only): a child's {@code @IdempotentListener} window is checked too.
   */
  @Test
  void aChildListenersWindowIsCheckedAgainstTheLeaseOfTheParentsGuard() {
    withChild(
        runner.withPropertyValues("idempotency.lease=2m"),
        ChildMinuteListenerConfig.class,
        (parent, child) ->
            // a 1m listener window on the parent's guard, whose lease is 2m
            assertStartFailed(child, "lease", "PT2M"));
  }

  /** Sends a backlog as soon as it starts, as a listener container or a scheduler does. */
  static class Backlog implements SmartLifecycle {
    private final ChildSide.Mailer mailer;
    private volatile boolean running;

    Backlog(ChildSide.Mailer mailer) {
      this.mailer = mailer;
    }

    @Override
    public void start() {
      running = true;
      mailer.send("42"); // one order's notification
      mailer.send("42"); // and its redelivery
    }

    @Override
    public void stop() {
      running = false;
    }

    @Override
    public boolean isRunning() {
      return running;
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class PlainChildWithBacklogConfig {
    @Bean
    ChildSide.Mailer childMailer() {
      return new ChildSide.Mailer();
    }

    @Bean
    Backlog backlog(ChildSide.Mailer childMailer) {
      return new Backlog(childMailer);
    }
  }

  /**
   * A plain child (no advisor) with an {@code @Idempotent} bean fails its refresh
   * (UnguardedChildContexts), but only on its ContextRefreshedEvent, which a context publishes
   * after it started its lifecycle beans (listener containers, schedulers): what they call before
   * it runs unguarded. Here a lifecycle bean sends one order twice at its start: two sends, then
   * the refusal.
   *
   * <p>Still open (fixhier2, fixhier3): not fixable from the parent for a lifecycle bean of the
   * child's own. A plain child runs none of the starter's beans: Spring applies only a context's
   * own post-processors to its beans (PostProcessorRegistrationDelegate looks them up with
   * getBeanNamesForType, which does not search ancestors), a plain child has no
   * SmartInitializingSingleton or lifecycle bean of the starter, and its refresh (Spring 6.2 and
   * 7.0 AbstractApplicationContext.refresh) publishes no event and asks its parent for no bean of
   * the starter before finishRefresh starts its lifecycle beans; ContextRefreshedEvent is the first
   * the parent hears of it. Fixed (fixhier3) where the child does ask: a listener on one of the
   * parent's container factories is refused as that factory creates its container, before the
   * child's lifecycle starts (PlainChildJmsListenerTest, PlainChildKafkaListenerTest,
   * PlainChildRabbitListenerTest). For the rest the fix is in the child (import the
   * auto-configuration, docs/spring-boot.md "Context hierarchies" says so).
   *
   * <p>fixboot2 looked again (Spring 6.2.12 and 7.0.8 bytecode of refresh): before finishRefresh
   * starts lifecycle beans, a plain child asks its parent only for the beans its own beans inject
   * and, in finishBeanFactoryInitialization, containsBean("bootstrapExecutor") and
   * containsBean("conversionService"), which consult the parent. Taking one of those names in the
   * parent (a non-singleton FactoryBean called per child) would change the parent's own start
   * (background bootstrap, its conversions) and still not say which child asked; a JVM-wide hook (a
   * BeanInfoFactory in spring.factories) sees classes, not contexts. Neither is sound, so this
   * stays a documented limit, tagged open-finding: it fails until Spring gives a parent a hook into
   * a child's refresh.
   */
  @Test
  @Tag("open-finding")
  void aPlainChildIsRefusedBeforeItsLifecycleBeansRunItsUnguardedMethods() {
    withPlainChild(
        runner,
        PlainChildWithBacklogConfig.class,
        (parent, child) -> {
          Throwable refusal = null;
          try {
            child.refresh();
          } catch (RuntimeException e) {
            refusal = e;
          }
          assertThat(refusal).as("the plain child's refresh").isNotNull();
          assertThat(SENT)
              .as("sends of one key by the plain child before its refusal (%s)", refusal)
              .hasSizeLessThanOrEqualTo(1);
        });
  }
}
