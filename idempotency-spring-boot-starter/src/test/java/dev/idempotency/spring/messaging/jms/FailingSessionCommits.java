package dev.idempotency.spring.messaging.jms;

import jakarta.jms.Connection;
import jakarta.jms.ConnectionFactory;
import jakarta.jms.JMSException;
import jakarta.jms.Session;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.jms.config.DefaultJmsListenerContainerFactory;
import org.springframework.jms.connection.SessionProxy;
import org.springframework.util.ClassUtils;

/**
 * Wraps the application's JMS connection factory (Spring Boot's, on the embedded Artemis broker) so
 * that the commit of a transacted session fails once for the deliveries of the events a test names:
 * it throws instead of committing, as a broker that refused the commit does; the session itself is
 * Artemis's, and the container's rollback of it is real, so the broker redelivers.
 */
final class FailingSessionCommits implements BeanPostProcessor {

  private final Set<String> failNext = ConcurrentHashMap.newKeySet();
  private final Set<String> interruptNext = ConcurrentHashMap.newKeySet();
  private final Set<String> loseAnswerNext = ConcurrentHashMap.newKeySet();
  private final Set<String> rollBackInterruptedNext = ConcurrentHashMap.newKeySet();
  private final Set<String> refuseInterruptedNext = ConcurrentHashMap.newKeySet();
  private final Set<String> interruptEvery = ConcurrentHashMap.newKeySet();
  private final Set<String> closeBeforeNext = ConcurrentHashMap.newKeySet();
  private final Map<String, AtomicInteger> tries = new ConcurrentHashMap<>();
  private final ThreadLocal<String> running = new ThreadLocal<>();

  /** The next commit of a session in which {@code event} ran fails. */
  void failNextCommitOf(String event) {
    failNext.add(event);
  }

  /**
   * The next commit of a session in which {@code event} ran commits, then fails as Artemis's commit
   * does when an interrupt lands while it waits for the broker's answer (a runtime exception caused
   * by an {@link InterruptedException}), as the container's interrupt at shutdown makes it fail.
   */
  void interruptNextCommitOf(String event) {
    interruptNext.add(event);
  }

  /**
   * The next commit of a session in which {@code event} ran commits, then fails as Artemis's
   * blocking commit does when the connection fails while it waits for the broker's answer (a {@code
   * JMSException} linked to Artemis's {@code ActiveMQUnBlockedException}): the broker committed,
   * the client cannot know it, and nothing interrupted the thread.
   */
  void loseAnswerOfNextCommitOf(String event) {
    loseAnswerNext.add(event);
  }

  /**
   * The next commit of a session in which {@code event} ran is rolled back (Artemis's own rollback:
   * the broker will redeliver) and fails as a commit the broker refused does ({@code
   * TransactionRolledBackException}), while an interrupt lands on the thread during it, as the
   * container's interrupt at shutdown lands once per receive timeout.
   */
  void rollBackNextCommitWhileInterruptedOf(String event) {
    rollBackInterruptedNext.add(event);
  }

  /**
   * The next commit of a session in which {@code event} ran is refused by the broker with an error
   * that is not a rollback verdict (a plain {@code JMSException}, as Artemis passes on a
   * server-side failure of the commit, an I/O error of its journal say: the server drops the
   * transaction and starts a new one), while an interrupt lands on the thread during it. The
   * session's work is rolled back (Artemis's own rollback: the broker will redeliver), as the
   * server dropped it.
   */
  void refuseNextCommitWhileInterruptedOf(String event) {
    refuseInterruptedNext.add(event);
  }

  /**
   * Every commit of a session in which {@code event} ran commits, then fails as {@link
   * #interruptNextCommitOf} says: as if the container's interrupts kept landing in it.
   */
  void interruptEveryCommitOf(String event) {
    interruptEvery.add(event);
  }

  /**
   * The session in which {@code event} runs next is closed just before its commit, as Spring's
   * {@code DefaultMessageListenerContainer} closes the session of a delivery it gave up waiting for
   * at shutdown (Spring Framework 6.2.18 and 7.0.7 on), or as a failed connection closes it: the
   * close and the commit that follows are Artemis's own (the commit fails with "Session is closed",
   * and the broker, which rolled the session's transaction back, delivers the message again).
   */
  void closeSessionBeforeNextCommitOf(String event) {
    closeBeforeNext.add(event);
  }

  /** How many times a session in which {@code event} ran was committed. */
  int commitTries(String event) {
    AtomicInteger count = tries.get(event);
    return count == null ? 0 : count.get();
  }

  /** Called by a listener: the session on this thread runs {@code event}. */
  void running(String event) {
    running.set(event);
  }

  /**
   * A listener container recovers from a failed commit with a new session, and waits its recovery
   * interval (5 s by default) first when the failure was its first delivery's: 100 ms here, so that
   * the broker's redelivery comes sooner. The redelivery itself is the broker's, as before.
   */
  @Override
  public Object postProcessBeforeInitialization(Object bean, String beanName) {
    if (bean instanceof DefaultJmsListenerContainerFactory factory) {
      factory.setRecoveryInterval(100L);
    }
    return bean;
  }

  @Override
  public Object postProcessAfterInitialization(Object bean, String beanName) {
    return bean instanceof ConnectionFactory factory
        ? wrap(factory, ConnectionFactory.class)
        : bean;
  }

  /**
   * A proxy with every interface of the target (so that Spring's {@code SmartConnectionFactory} and
   * {@code SessionProxy} still tell what they tell), which passes every call on.
   */
  private <T> T wrap(T target, Class<T> type) {
    return type.cast(
        Proxy.newProxyInstance(
            type.getClassLoader(),
            ClassUtils.getAllInterfacesForClass(target.getClass()),
            (proxy, method, arguments) -> {
              if (method.getName().equals("equals") && method.getParameterCount() == 1) {
                return proxy == arguments[0];
              }
              if (method.getName().equals("hashCode") && method.getParameterCount() == 0) {
                return System.identityHashCode(proxy);
              }
              if (type == Session.class && method.getName().equals("commit")) {
                String event = running.get();
                if (event != null) {
                  tries.computeIfAbsent(event, any -> new AtomicInteger()).incrementAndGet();
                }
                if (event != null && interruptEvery.contains(event)) {
                  invoke(method, target, arguments);
                  throw new IllegalStateException(
                      "the commit of the session of " + event + " was interrupted (test)",
                      new InterruptedException());
                }
                running.remove();
                if (event != null && closeBeforeNext.remove(event)) {
                  // Artemis's session itself, not the cache's handle (whose close only rolls back)
                  Session session = (Session) target;
                  (session instanceof SessionProxy cached ? cached.getTargetSession() : session)
                      .close();
                  return invoke(method, target, arguments);
                }
                if (event != null && failNext.remove(event)) {
                  throw new JMSException(
                      "the commit of the session of " + event + " failed (test)");
                }
                if (event != null && interruptNext.remove(event)) {
                  invoke(method, target, arguments);
                  throw new IllegalStateException(
                      "the commit of the session of " + event + " was interrupted (test)",
                      new InterruptedException());
                }
                if (event != null && rollBackInterruptedNext.remove(event)) {
                  ((Session) target).rollback();
                  Thread.currentThread().interrupt();
                  throw new jakarta.jms.TransactionRolledBackException(
                      "the commit of the session of " + event + " was rolled back (test)");
                }
                if (event != null && refuseInterruptedNext.remove(event)) {
                  ((Session) target).rollback();
                  Thread.currentThread().interrupt();
                  throw new JMSException(
                      "AMQ229xxx: the server failed the commit of the session of "
                          + event
                          + " (test)");
                }
                if (event != null && loseAnswerNext.remove(event)) {
                  method.invoke(target, arguments);
                  JMSException lost =
                      new JMSException(
                          "AMQ219016: Connection failure detected. Unblocking a blocking call"
                              + " that will never get a response (test: the commit of "
                              + event
                              + " reached the broker)");
                  lost.setLinkedException(
                      new org.apache.activemq.artemis.api.core.ActiveMQUnBlockedException(
                          "AMQ219016: Connection failure detected (test)"));
                  throw lost;
                }
              } else if (type == Session.class && method.getName().equals("rollback")) {
                running.remove();
              }
              Object result = invoke(method, target, arguments);
              if (result instanceof Session session) {
                return wrap(session, Session.class);
              }
              if (result instanceof Connection connection) {
                return wrap(connection, Connection.class);
              }
              return result;
            }));
  }

  private static Object invoke(Method method, Object target, Object[] arguments) throws Throwable {
    try {
      return method.invoke(target, arguments);
    } catch (InvocationTargetException e) {
      throw e.getCause();
    }
  }
}
