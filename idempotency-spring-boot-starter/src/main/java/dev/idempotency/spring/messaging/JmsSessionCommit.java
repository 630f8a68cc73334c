package dev.idempotency.spring.messaging;

import jakarta.jms.JMSException;
import jakarta.jms.Message;
import jakarta.jms.Session;
import jakarta.jms.TransactionRolledBackException;
import java.io.InterruptedIOException;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Predicate;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The starter's commit of a transacted JMS session whose listener returned, then the outcome of
 * what the listener sent ({@link JmsDeliveryListener}).
 *
 * <p>The commit runs with the thread's interrupt held back, and the interrupt is set again after it
 * and the record. A commit that fails goes on to the container, which rolls the session back, so
 * the interrupt is not set again then: Artemis's rollback fails on an interrupted thread and leaves
 * its session stopped, and the broker's redelivery never comes. Two interrupts reach it:
 *
 * <ul>
 *   <li>one the application left on the thread (a provider client interrupted mid-send that
 *       finished the send): the guarded listener cleared it already as it returned ({@link
 *       ConsumerThreadInterrupts}), so it is not set again after the commit, where it would fail
 *       the container's own commit;
 *   <li>Spring's {@code DefaultMessageListenerContainer}, shutting down while the listener ran,
 *       interrupts the consumer's thread once per receive timeout for as long as the delivery runs,
 *       so an interrupt can land inside the commit itself. Artemis's blocking commit then fails
 *       ({@code ActiveMQInterruptedException}) after it wrote the commit to the broker, while it
 *       waited for the answer.
 * </ul>
 *
 * <p>A commit that fails is one of five cases, told by the failure's type (and its causes):
 *
 * <ol>
 *   <li>The broker's verdict of rollback ({@code TransactionRolledBackException}, Artemis's {@code
 *       ActiveMQTransactionRolledBackException}), even with an interrupt pending: the key is
 *       released and the failure goes on to the container; the broker redelivers, and the listener
 *       runs again (SPEC 15: an outcome is recorded only for a delivery whose transaction
 *       committed). It is never tried again: a retry would commit an empty transaction.
 *   <li>A fate the client cannot know: the connection failed while the commit waited for its answer
 *       (Artemis's {@code ActiveMQUnBlockedException}, {@code ActiveMQConnectionTimedOutException},
 *       or the {@code ActiveMQTransactionOutcomeUnknownException} it throws for both). The outcome
 *       is recorded, never released, with one warning, and the failure goes on to the container
 *       (SPEC 1: a release would send again for a republished copy of a message the broker
 *       consumed; if the broker in fact rolled back, the redelivery is a replay and what the
 *       listener sent in its session is lost, as docs/message-consumers.md says).
 *   <li>A failure that an interrupt caused (an interrupt in its causes; an interrupt that is merely
 *       pending on the thread does not count): tried again, the interrupt cleared, after a pause of
 *       {@link #INTERRUPTED_COMMIT_PAUSE} (which interrupts do not cut short: they are held back as
 *       well), for at most {@link #INTERRUPTED_COMMIT_RETRY}: the listener's send happened, and
 *       only the container's interrupt stood between it and its record. If a retry commits, the
 *       outcome is recorded. If none does, the fate is unknown, as in case 2. A retry that fails
 *       with a verdict of rollback is case 2 too: the interrupted commit before it may have
 *       committed.
 *   <li>A session that is gone before the commit could be made (JMS's {@code IllegalStateException}
 *       for a closed session, Artemis's {@code ActiveMQObjectClosedException} "Session is closed"
 *       or {@code ActiveMQNotConnectedException}), with no interrupted try before it: Spring's
 *       {@code DefaultMessageListenerContainer} that gives up waiting for a delivery at shutdown
 *       (Spring Framework 6.2.18 and 7.0.7 on: one interrupt, then one receive timeout later it
 *       closes the delivery's session and connection), or a connection that failed. The commit
 *       never reached the broker, which rolls the transaction back and delivers the message again;
 *       the listener's send happened. Neither recorded (SPEC 15: the transaction did not commit)
 *       nor released (that would send again at once, for the redelivery): the key is left claimed,
 *       as a crash leaves it, with one warning, and the failure goes on to the container. A
 *       redelivery within the lease is deferred; one after it takes the key over and sends again
 *       with the same provider key (SPEC 1's crash case, reported as a takeover), and the work of
 *       its transaction is done once.
 *   <li>Any other refusal (no interrupt in its causes, even with one pending): the key is released
 *       and the failure goes on to the container, which rolls back: the broker delivers the message
 *       again.
 * </ol>
 */
final class JmsSessionCommit {

  /** How long a commit that an interrupt failed is tried again. */
  static final Duration INTERRUPTED_COMMIT_RETRY = Duration.ofSeconds(5);

  /** The pause before each new try of a commit that an interrupt failed. */
  static final Duration INTERRUPTED_COMMIT_PAUSE = Duration.ofMillis(50);

  /**
   * How long the commits of this class loader are tried again: {@link #INTERRUPTED_COMMIT_RETRY}; a
   * test of the path where they keep failing shortens it.
   */
  static volatile Duration interruptedCommitRetry = INTERRUPTED_COMMIT_RETRY;

  private static final Logger log = LoggerFactory.getLogger(IdempotentListener.class);

  private static final String ARTEMIS = "org.apache.activemq.artemis.api.core.";

  /** Artemis's exceptions for a commit whose answer never came. */
  private static final Set<String> FATE_UNKNOWN =
      Set.of(
          ARTEMIS + "ActiveMQUnBlockedException",
          ARTEMIS + "ActiveMQConnectionTimedOutException",
          ARTEMIS + "ActiveMQTransactionOutcomeUnknownException");

  /** Artemis's exceptions for a commit that was never sent: the session or connection is gone. */
  private static final Set<String> SESSION_GONE =
      Set.of(ARTEMIS + "ActiveMQObjectClosedException", ARTEMIS + "ActiveMQNotConnectedException");

  private JmsSessionCommit() {}

  /**
   * Commits {@code session}, then completes {@code completions}: recorded if it committed (or its
   * fate is unknown), released if the broker rolled it back or refused it, left claimed if the
   * session was gone before the commit.
   *
   * @param listener the container's message listener, named in the log
   * @param message the delivery, whose destination is named in the log
   * @throws JMSException the commit's failure, once the completions ran
   */
  static void commitThenComplete(
      Session session,
      List<ContainerTransactions.Completion> completions,
      Object listener,
      Message message)
      throws JMSException {
    boolean interrupted = Thread.interrupted();
    boolean commitInterrupted = false;
    boolean committed = false;
    Duration retryFor = interruptedCommitRetry;
    long deadline = System.nanoTime() + retryFor.toNanos();
    try {
      while (true) {
        try {
          session.commit();
          committed = true;
          break;
        } catch (JMSException | RuntimeException | Error failure) {
          // an interrupt that is merely pending does not make a refusal an interrupted commit: only
          // a failure whose causes show the interrupt is tried again (a refused commit that an
          // interrupt came with would commit an empty transaction on its retry)
          boolean byInterrupt = causedByInterrupt(failure);
          interrupted |= Thread.interrupted() | byInterrupt;
          boolean rolledBack = rolledBack(failure);
          if (rolledBack && !commitInterrupted) {
            // the broker's verdict, whatever interrupt came with it: the redelivery runs again
            ContainerTransactions.complete(completions, false);
            throw failure;
          }
          if (rolledBack || outcomeUnknown(failure)) {
            warnFateUnknown(
                listener,
                message,
                rolledBack
                    ? "a try was interrupted, and the broker rolled back the try after it"
                    : "the connection failed or timed out while it waited for the answer");
            ContainerTransactions.complete(completions, true);
            throw failure;
          }
          commitInterrupted |= byInterrupt;
          if (byInterrupt && System.nanoTime() - deadline < 0) {
            interrupted |= pause(INTERRUPTED_COMMIT_PAUSE.toNanos());
            continue;
          }
          if (!commitInterrupted && sessionGone(failure)) {
            log.warn(
                "The session of JMS listener {} (a delivery from {}) was closed before its commit"
                    + " (the container gave up waiting for it at shutdown, or the connection"
                    + " failed): the delivery did not commit, and the broker delivers it again. The"
                    + " listener's send happened, so its key is left claimed, neither recorded nor"
                    + " released: a redelivery within the lease is deferred, one after it sends"
                    + " again as after a crash (a takeover)",
                listener.getClass().getName(),
                destinationOf(message));
            ContainerTransactions.abandon(completions);
            throw failure;
          }
          if (!commitInterrupted) {
            ContainerTransactions.complete(completions, false);
            throw failure;
          }
          warnFateUnknown(
              listener,
              message,
              byInterrupt
                  ? "it kept failing for "
                      + retryFor
                      + " while the container interrupted its thread (it shuts down)"
                  : "a try was interrupted, and the try after it failed");
          ContainerTransactions.complete(completions, true);
          throw failure;
        }
      }
      if (commitInterrupted) {
        log.debug(
            "The session commit of JMS listener {} succeeded once tried again after an interrupt",
            listener.getClass().getName());
      }
      ContainerTransactions.complete(completions, true);
    } finally {
      interrupted |= Thread.interrupted();
      if (interrupted && committed) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /** One WARN per commit whose fate is unknown; it names the listener, never the key. */
  private static void warnFateUnknown(Object listener, Message message, String why) {
    log.warn(
        "The fate of the session commit of JMS listener {} (a delivery from {}) is unknown: {}. The"
            + " listener's send happened, so its outcome is recorded, not released: a redelivery"
            + " or a republished copy is a replay (if the broker in fact rolled back, what the"
            + " listener sent in its session is lost; see the starter's docs on message consumers)",
        listener.getClass().getName(),
        destinationOf(message),
        why);
  }

  /**
   * Waits {@code nanos} whatever interrupts the thread meanwhile (the container's, once per receive
   * timeout), so that the next try of the commit starts with no interrupt set.
   *
   * @return whether an interrupt came meanwhile (it is cleared)
   */
  private static boolean pause(long nanos) {
    boolean interrupted = false;
    long end = System.nanoTime() + nanos;
    for (long left = nanos; left > 0; left = end - System.nanoTime()) {
      LockSupport.parkNanos(left);
      interrupted |= Thread.interrupted();
    }
    return interrupted;
  }

  private static String destinationOf(Message message) {
    try {
      return String.valueOf(message.getJMSDestination());
    } catch (JMSException | RuntimeException e) {
      return "an unknown destination";
    }
  }

  /**
   * Whether {@code failure} comes from an interrupt: an {@link InterruptedException} or {@link
   * InterruptedIOException} in its causes (and linked exceptions), or an exception named after one
   * (Artemis's {@code ActiveMQInterruptedException}, a {@code RuntimeException}).
   */
  static boolean causedByInterrupt(Throwable failure) {
    return anyInChain(
        failure,
        current ->
            current instanceof InterruptedException
                || current instanceof InterruptedIOException
                || current.getClass().getSimpleName().contains("Interrupted"));
  }

  /**
   * Whether {@code failure} is the broker's verdict of rollback: JMS's {@link
   * TransactionRolledBackException} (Artemis converts its own to it) in its causes.
   */
  static boolean rolledBack(Throwable failure) {
    return anyInChain(
        failure,
        current ->
            current instanceof TransactionRolledBackException
                || current
                    .getClass()
                    .getName()
                    .equals(ARTEMIS + "ActiveMQTransactionRolledBackException"));
  }

  /**
   * Whether {@code failure} says that the client cannot know the commit's fate: Artemis's
   * exceptions for a blocking call whose answer never came (the connection failed or timed out), by
   * their class (the starter does not depend on Artemis).
   */
  static boolean outcomeUnknown(Throwable failure) {
    return anyInChain(failure, current -> FATE_UNKNOWN.contains(current.getClass().getName()));
  }

  /**
   * Whether {@code failure} says that the session (or its connection) was gone before the commit
   * could be sent: JMS's {@link jakarta.jms.IllegalStateException}, which a transacted session's
   * commit throws only once the session is closed, or Artemis's exceptions for a closed session and
   * a destroyed connection, by their class.
   */
  static boolean sessionGone(Throwable failure) {
    return anyInChain(
        failure,
        current ->
            current instanceof jakarta.jms.IllegalStateException
                || SESSION_GONE.contains(current.getClass().getName()));
  }

  /** Whether {@code failure}, or one of its causes or linked exceptions, matches. */
  private static boolean anyInChain(Throwable failure, Predicate<Throwable> matches) {
    Throwable current = failure;
    for (int depth = 0; current != null && depth < 16; depth++) {
      if (matches.test(current)) {
        return true;
      }
      Throwable next = current.getCause();
      if (next == null && current instanceof JMSException jms) {
        next = jms.getLinkedException();
      }
      current = next;
    }
    return false;
  }
}
