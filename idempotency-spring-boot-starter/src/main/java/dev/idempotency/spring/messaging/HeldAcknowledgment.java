package dev.idempotency.spring.messaging;

/**
 * A batch listener's manual acknowledgement (Spring Kafka's {@code Acknowledgment} parameter),
 * handed to the listener in place of the container's and held until the starter knows what its
 * delivery did, for {@link ListenerBatches}. The listener gets only the messages to send, so its
 * acknowledgement of its list, which the container takes for the whole polled batch, is passed on
 * only where no message of the batch comes back; its nack names an index in its list, passed on as
 * the polled message's index, and the messages from there on count as not sent.
 */
interface HeldAcknowledgment {

  /** Whether the listener acknowledged its list. */
  boolean acknowledged();

  /** The index in the listener's list that it nacked from, or {@code -1}. */
  int nackedAt();

  /** Passes the listener's acknowledgement on to the container. */
  void passAcknowledgement();

  /** Passes the listener's nack on to the container, from the polled message at {@code index}. */
  void passNack(int index);

  /** Gives the listener's argument back its container's acknowledgement. */
  void restore();
}
