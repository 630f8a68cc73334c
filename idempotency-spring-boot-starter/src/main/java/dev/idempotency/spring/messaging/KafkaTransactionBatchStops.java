package dev.idempotency.spring.messaging;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.kafka.listener.BatchListenerFailedException;
import org.springframework.kafka.listener.ListenerUtils;
import org.springframework.kafka.listener.MessageListenerContainer;

/**
 * A Kafka batch listener's stop partway through its batch, in its container's Kafka transaction:
 * the transaction commits the records before the stop, instead of rolling back the sends they made.
 *
 * <p>Spring Kafka's {@code DefaultErrorHandler} answers a {@link BatchListenerFailedException} at
 * index {@code i} by seeking the consumer back to record {@code i} (or {@code i + 1} once it
 * recovered record {@code i}, a dead letter), then throws to have the container skip its commit
 * ("Seek to current after exception", or {@code RecordInRetryException} while record {@code i} is
 * retried), each with the batch's failure as its cause. Without a transaction that leaves the
 * records before the stop committed and the rest to come back, which is what the starter reports a
 * batch's stop for. In a container transaction the throw rolls the whole transaction back: the
 * records before the stop, whose sends happened, come back and would be sent again, at every
 * redelivery (SPEC 1). So, in a Kafka transaction, the starter's error handler takes that throw as
 * the handler's answer, once it sought: the transaction commits, and its consumer offsets end where
 * the consumer reads next, for each partition of the batch ({@link
 * ContainerTransactionManager#commitOffsetsAt}), never past a record that comes back. What the
 * listener produced in the transaction and the outcomes of the records before the stop are
 * committed with them; a dead letter the handler published too.
 *
 * <p>A stop that leaves the consumer at the first record of each partition of the batch (nothing
 * done, nothing recovered) keeps the rollback, as does every other failure of the handler, and a
 * throw after which nothing comes back (no seek within the batch). Only a Kafka transaction
 * manager's transaction commits so; another transaction around the container (a JDBC or JPA
 * manager) still rolls back. A transaction that does not commit after such a stop (the producer
 * refused a dead letter in it, which leaves it unable to commit) still records the records before
 * the stop ({@link ContainerTransactionManager}): Spring Kafka's handler committed their offsets
 * through the consumer, and the after-rollback processor's redelivery of them is a replay; except
 * those for which the listener produced records in that transaction ({@link TransactionProduces}),
 * which the abort discarded: they are released and produced again at the redelivery. Stateless.
 */
final class KafkaTransactionBatchStops {

  private static final Logger log = LoggerFactory.getLogger(IdempotentListener.class);

  private KafkaTransactionBatchStops() {}

  /**
   * Has the container's Kafka transaction commit the records of {@code data} before the positions
   * the error handler sought the consumer to, if {@code handlerFailure} is the handler's throw
   * after its seeks for a batch failure that names a record.
   *
   * @param handlerFailure what the error handler threw
   * @param thrown the batch's failure the handler was given
   * @return whether the transaction now commits so (the handler's throw is then answered)
   */
  static boolean commitBeforeStop(
      RuntimeException handlerFailure,
      Exception thrown,
      ConsumerRecords<?, ?> data,
      Consumer<?, ?> consumer,
      MessageListenerContainer container) {
    if (handlerFailure.getCause() != thrown || !namesARecord(thrown) || data.isEmpty()) {
      return false;
    }
    Map<TopicPartition, OffsetAndMetadata> offsets = new LinkedHashMap<>();
    boolean advanced = false;
    boolean soughtBack = false;
    for (TopicPartition partition : data.partitions()) {
      List<? extends ConsumerRecord<?, ?>> records = data.records(partition);
      long first = records.get(0).offset();
      long end = records.get(records.size() - 1).offset() + 1;
      long next = consumer.position(partition);
      if (next < first || next > end) {
        return false; // not a seek within this batch: the transaction rolls back, as before
      }
      advanced |= next > first;
      soughtBack |= next < end;
      offsets.put(partition, ListenerUtils.createOffsetAndMetadata(container, next));
    }
    if (!advanced
        || !soughtBack
        || !ContainerTransactionManager.commitOffsetsAt(offsets, consumer.groupMetadata())) {
      return false;
    }
    log.debug(
        "A batch of {} stopped partway in its Kafka container transaction: it commits the records"
            + " before the stop, offsets {}; the rest come back",
        data.count(),
        offsets);
    return true;
  }

  private static boolean namesARecord(Throwable failure) {
    for (Throwable t = failure; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof BatchListenerFailedException) {
        return true;
      }
    }
    return false;
  }
}
