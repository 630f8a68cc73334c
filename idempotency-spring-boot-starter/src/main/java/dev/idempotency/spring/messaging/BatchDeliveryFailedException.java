package dev.idempotency.spring.messaging;

/**
 * Thrown by an {@link IdempotentListener} batch listener to say which message of its list failed,
 * the first one it did not send: the messages before {@code index} that the listener read were sent
 * (their outcomes are recorded), the one at {@code index} failed with the cause (its key is
 * released, or its failure stored if permanent), and the rest were not sent (their keys are
 * released). A message the listener never read was not sent, whatever its index. Works on every
 * broker; Spring Kafka's own {@code BatchListenerFailedException} is understood as well. Without
 * either, a failing batch listener names no message: every key of the list it read is released, and
 * the redelivery sends each again, a second send of those it had sent before failing.
 *
 * <p>The container then learns of the failure as it expects: Spring Kafka gets a {@code
 * BatchListenerFailedException} with the index in the batch it delivered (or, where the listener
 * left an earlier message unread, that message's index, so that no unsent message is committed; the
 * next delivery then holds the failed message back: the listener gets the messages before it
 * without it, then it alone, so that the container's tries and recoverer apply to it); RabbitMQ
 * gets the cause, and redelivers the whole batch (its sent messages are then replays).
 */
public class BatchDeliveryFailedException extends RuntimeException {

  private static final long serialVersionUID = 1L;

  /** The index of the failed message in the list the listener got. */
  private final int index;

  /**
   * Creates the exception.
   *
   * @param index the index, in the list the listener got, of the message that failed
   * @param cause why it failed
   * @throws IllegalArgumentException if the index is negative
   */
  public BatchDeliveryFailedException(int index, Throwable cause) {
    super("the batch listener failed at message " + index + ": " + cause, cause);
    if (index < 0) {
      throw new IllegalArgumentException("index must not be negative, was " + index);
    }
    this.index = index;
  }

  /**
   * The index of the failed message in the list the listener got.
   *
   * @return the index
   */
  public int index() {
    return index;
  }
}
