package dev.idempotency.spring.autoconfigure;

import dev.idempotency.IdempotencyGuard;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.config.BeanDefinition;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;
import org.springframework.beans.factory.support.AbstractBeanDefinition;
import org.springframework.context.ApplicationContext;
import org.springframework.context.ApplicationContextAware;
import org.springframework.context.ApplicationListener;
import org.springframework.context.SmartLifecycle;
import org.springframework.context.event.ContextClosedEvent;

/**
 * Closes the context's {@link IdempotencyGuard} beans when the context closes, in a lifecycle phase
 * of their own ({@link #PHASE}): after the web server's graceful shutdown and stop and after the
 * listener containers have stopped (no new calls come), and before Spring Data Redis's {@code
 * LettuceConnectionFactory} (phase 0) closes the connection the store may run on. The guard's
 * close() lets the calls still running finish and records their outcomes for its grace period, so
 * that drain needs the store's connections to work: bean destruction, where the guard would
 * otherwise be closed, comes after every lifecycle bean has stopped.
 *
 * <p>Only a context that closes closes its guards: a {@code stop()} of a context that may be
 * started again leaves them open. Guards of a parent context are left to the parent, and guards
 * Spring would not close on destroy (registered as objects, or declared with no destroy method) to
 * the application.
 */
final class GuardShutdown
    implements SmartLifecycle, ApplicationListener<ContextClosedEvent>, ApplicationContextAware {

  /**
   * The phase: below the web server's stop ({@code SmartLifecycle.DEFAULT_PHASE - 2048} on Spring
   * Boot 3.5 and 4.0; its graceful shutdown is at {@code - 1024}, listener containers higher still)
   * and above Spring Data Redis's connection factory (0).
   */
  static final int PHASE = SmartLifecycle.DEFAULT_PHASE - 4096;

  private static final Logger log = LoggerFactory.getLogger(GuardShutdown.class);

  private final ConfigurableListableBeanFactory beanFactory;
  private volatile @Nullable ApplicationContext context;
  private volatile boolean running;
  private volatile boolean closing;

  GuardShutdown(ConfigurableListableBeanFactory beanFactory) {
    this.beanFactory = beanFactory;
  }

  @Override
  public void setApplicationContext(ApplicationContext applicationContext) {
    this.context = applicationContext;
  }

  @Override
  public void onApplicationEvent(ContextClosedEvent event) {
    // a child context's event reaches the parent's listeners too: only this context's counts
    if (event.getApplicationContext() == context) {
      closing = true;
    }
  }

  @Override
  public void start() {
    running = true;
  }

  @Override
  public void stop() {
    running = false;
    if (!closing) {
      return;
    }
    for (String name : beanFactory.getBeanNamesForType(IdempotencyGuard.class, false, false)) {
      if (beanFactory.containsSingleton(name) && closedOnDestroy(name)) {
        log.debug("Closing the idempotency guard '{}' before the store's connections stop", name);
        // waits for the calls still running, for at most the guard's grace period
        beanFactory.getBean(name, IdempotencyGuard.class).close();
      }
    }
  }

  /**
   * Whether Spring would close the guard {@code name} when its beans are destroyed, so that closing
   * it earlier changes only when: a bean definition whose destroy method is inferred (an {@code
   * AutoCloseable}'s {@code close()}) or {@code close}. A guard registered as an object (perhaps
   * shared with another context), handed out by a {@code FactoryBean}, or declared with no destroy
   * method ({@code @Bean(destroyMethod = "")}) is the application's to close.
   */
  private boolean closedOnDestroy(String name) {
    if (!beanFactory.containsBeanDefinition(name) || beanFactory.isFactoryBean(name)) {
      // a factory bean is destroyed, never the object it hands out
      return false;
    }
    BeanDefinition definition = beanFactory.getMergedBeanDefinition(name);
    if (!(definition instanceof AbstractBeanDefinition declared)) {
      return true;
    }
    String[] destroyMethods = declared.getDestroyMethodNames();
    if (destroyMethods == null) {
      return true; // none named: Spring infers an AutoCloseable's close()
    }
    for (String method : destroyMethods) {
      if (AbstractBeanDefinition.INFER_METHOD.equals(method) || "close".equals(method)) {
        return true;
      }
    }
    return false;
  }

  @Override
  public boolean isRunning() {
    return running;
  }

  @Override
  public int getPhase() {
    return PHASE;
  }
}
