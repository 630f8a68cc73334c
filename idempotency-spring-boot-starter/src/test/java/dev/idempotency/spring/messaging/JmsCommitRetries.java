package dev.idempotency.spring.messaging;

import java.time.Duration;

/**
 * Shortens how long the starter tries again a JMS session commit that interrupts keep failing
 * ({@link JmsSessionCommit#INTERRUPTED_COMMIT_RETRY}, 5 s), so that a test of what follows needs no
 * multi-second wait.
 */
public final class JmsCommitRetries {

  private JmsCommitRetries() {}

  /** Puts the window back as it was. */
  public interface Restore extends AutoCloseable {
    @Override
    void close();
  }

  /**
   * Tries commits again for {@code retryFor} until the returned handle is closed.
   *
   * @return what puts the window back
   */
  public static Restore shortenedTo(Duration retryFor) {
    Duration before = JmsSessionCommit.interruptedCommitRetry;
    JmsSessionCommit.interruptedCommitRetry = retryFor;
    return () -> JmsSessionCommit.interruptedCommitRetry = before;
  }

  /** The pause between two tries of such a commit. */
  public static Duration pause() {
    return JmsSessionCommit.INTERRUPTED_COMMIT_PAUSE;
  }
}
