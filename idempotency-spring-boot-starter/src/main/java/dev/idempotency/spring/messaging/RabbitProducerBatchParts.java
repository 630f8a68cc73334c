package dev.idempotency.spring.messaging;

import java.util.Collection;
import java.util.Date;
import java.util.Map;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.core.MessageProperties;
import org.springframework.amqp.rabbit.batch.BatchingStrategy;
import org.springframework.amqp.rabbit.batch.MessageBatch;
import org.springframework.amqp.rabbit.listener.AbstractMessageListenerContainer;
import org.springframework.beans.BeanUtils;

/**
 * Keeps the starter from reading a header key of one message of a producer's batch ({@code
 * BatchingRabbitTemplate}) as another's. Spring AMQP's {@code SimpleBatchingStrategy} keeps the
 * first message's headers only, and its {@code deBatch} hands every part the batch message's
 * properties (shared, or copied for the last part): each part would carry the first message's key,
 * and be acknowledged as its replay, unsent. The starter cannot know at startup whether a producer
 * batches, so each Spring AMQP container's {@link BatchingStrategy} is wrapped ({@link #markIn}):
 * every part after the first gets properties of its own with a {@link #PART} header, and the
 * starter reads no header of such a part ({@link #headersOf}). A header-keyed listener then finds
 * no key for it and rejects it without requeue, nothing sent ({@link
 * MissingIdempotencyKeyException}); a key read from the payload is each part's own and works. The
 * first part keeps the batch message's headers, which are its own.
 */
final class RabbitProducerBatchParts {

  /**
   * The header the starter puts on each part of a producer's batch after the first: its position in
   * the batch (1 for the second part).
   */
  static final String PART = "idempotency_producerBatchPart";

  private RabbitProducerBatchParts() {}

  /**
   * Wraps the batching strategy of a Spring AMQP listener container, unless already wrapped, so
   * that the parts after the first of each batch it splits are marked ({@link #PART}). Anything
   * else is left as it is.
   */
  static void markIn(Object container) {
    if (!(container instanceof AbstractMessageListenerContainer rabbit)) {
      return;
    }
    Object current =
        ListenerContainerHooks.current(rabbit, "getBatchingStrategy", "batchingStrategy");
    if (current instanceof BatchingStrategy strategy && !(strategy instanceof Marking)) {
      rabbit.setBatchingStrategy(new Marking(strategy));
    }
  }

  /**
   * The headers the starter may read a key from: none for a part after the first of a producer's
   * batch (it carries the first message's), else the message's own.
   */
  static Map<String, Object> headersOf(Message message) {
    Map<String, Object> headers = message.getMessageProperties().getHeaders();
    return headers.containsKey(PART) ? Map.of() : headers;
  }

  /** A container's batching strategy, marking each part it splits after the first. */
  private static final class Marking implements BatchingStrategy {

    private final BatchingStrategy delegate;

    Marking(BatchingStrategy delegate) {
      this.delegate = delegate;
    }

    @Override
    public @Nullable MessageBatch addToBatch(String exchange, String routingKey, Message message) {
      return delegate.addToBatch(exchange, routingKey, message);
    }

    @Override
    public @Nullable Date nextRelease() {
      return delegate.nextRelease();
    }

    @Override
    public Collection<MessageBatch> releaseBatches() {
      return delegate.releaseBatches();
    }

    @Override
    public boolean canDebatch(MessageProperties properties) {
      return delegate.canDebatch(properties);
    }

    @Override
    public void deBatch(Message message, Consumer<Message> fragmentConsumer) {
      int[] position = {0};
      delegate.deBatch(
          message,
          fragment -> {
            int part = position[0]++;
            fragmentConsumer.accept(part == 0 ? fragment : marked(fragment, part));
          });
    }

    /** The part with properties of its own (not the batch message's, which others share). */
    private static Message marked(Message fragment, int part) {
      MessageProperties shared = fragment.getMessageProperties();
      MessageProperties own = new MessageProperties();
      BeanUtils.copyProperties(shared, own);
      own.getHeaders().putAll(shared.getHeaders());
      own.setHeader(PART, part);
      return new Message(fragment.getBody(), own);
    }
  }
}
