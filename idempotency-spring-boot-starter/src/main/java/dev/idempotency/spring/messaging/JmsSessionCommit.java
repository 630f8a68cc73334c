package dev.idempotency.spring.messaging;

import jakarta.jms.JMSException;
import jakarta.jms.Message;
import jakarta.jms.Session;
import java.io.InterruptedIOException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.locks.LockSupport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The starter's commit of a transacted JMS session whose listener returned, then the outcome of
 * what the listener sent ({@link JmsDeliveryListener}).
 *
 * <p>The commit runs with the thread's interrupt held back, and the interrupt is set again after it
 * and the record. Two interrupts reach it:
 *
 * <ul>
 *   <li>one the application left on the thread (a provider client interrupted mid-send that
 *       finished the send): it is cleared before the commit;
 *   <li>Spring's {@code DefaultMessageListenerContainer}, shutting down while the listener ran,
 *       interrupts the consumer's thread once per receive timeout for as long as the delivery runs,
 *       so an interrupt can land inside the commit itself. Artemis's blocking commit then fails
 *       ({@code ActiveMQInterruptedException}) after it wrote the commit to the broker, while it
 *       waited for the answer.
 * </ul>
 *
 * <p>A commit that failed because of an interrupt is tried again, the interrupt cleared, after a
 * pause of {@link #INTERRUPTED_COMMIT_PAUSE} (which interrupts do not cut short: they are held back
 * as well), for at most {@link #INTERRUPTED_COMMIT_RETRY}: the listener's send happened, and only
 * the container's interrupt stood between it and its record. If a retry commits, the outcome is
 * recorded. If none does, the commit's fate is unknown (the broker most likely committed the first
 * one): the outcome is recorded all the same, never released, with a warning, and the failure goes
 * on to the container (SPEC 1: a release would send again on redelivery, or on a republished copy).
 * A commit refused for another reason (nothing interrupted it) releases the key and goes on to the
 * container, which rolls back: the broker delivers the message again, and the listener runs again.
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

  private JmsSessionCommit() {}

  /**
   * Commits {@code session}, then completes {@code completions}: recorded if it committed (or its
   * fate is unknown because interrupts kept failing it), released if the commit was refused.
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
    Duration retryFor = interruptedCommitRetry;
    long deadline = System.nanoTime() + retryFor.toNanos();
    try {
      while (true) {
        try {
          session.commit();
          break;
        } catch (JMSException | RuntimeException | Error failure) {
          boolean byInterrupt = Thread.interrupted() | causedByInterrupt(failure);
          interrupted |= byInterrupt;
          commitInterrupted |= byInterrupt;
          if (byInterrupt && System.nanoTime() - deadline < 0) {
            interrupted |= pause(INTERRUPTED_COMMIT_PAUSE.toNanos());
            continue;
          }
          if (!commitInterrupted) {
            ContainerTransactions.complete(completions, false);
            throw failure;
          }
          log.warn(
              "The session commit of JMS listener {} (a delivery from {}) kept failing for {} while"
                  + " the container interrupted its thread (it shuts down); the listener's send"
                  + " happened, so its outcome is recorded, not released: a redelivery is a replay",
              listener.getClass().getName(),
              destinationOf(message),
              retryFor);
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
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
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
    Throwable current = failure;
    for (int depth = 0; current != null && depth < 16; depth++) {
      if (current instanceof InterruptedException
          || current instanceof InterruptedIOException
          || current.getClass().getSimpleName().contains("Interrupted")) {
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
