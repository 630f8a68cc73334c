package dev.idempotency.spring.messaging;

import static org.assertj.core.api.Assertions.assertThat;

import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.StringSerializer;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.Test;
import org.springframework.kafka.core.DefaultKafkaProducerFactory;

/**
 * Which producer factories {@link KafkaTransactionSends} observes: only a transaction-capable
 * factory gets its counting post-processor (a container's transaction can only begin on its
 * producers); a plain factory's producers stay the client's own, with no proxy on their sends. A
 * plain factory's producer is seen by a post-processor added after the starter's, which gets it as
 * the starter's left it (created without a broker: a plain producer connects only when it sends).
 */
class KafkaTransactionSendsObserveTest {

  @Test
  void aFactoryThatIsNotTransactionCapableKeepsItsProducersUnwrapped() {
    DefaultKafkaProducerFactory<String, String> plain = factory(null);
    DefaultKafkaProducerFactory<String, String> transactional =
        factory("observe-" + UUID.randomUUID());
    try {
      KafkaTransactionSends.observe(plain);
      KafkaTransactionSends.observe(transactional);
      List<Boolean> proxied = new ArrayList<>();
      plain.addPostProcessor(
          producer -> {
            proxied.add(Proxy.isProxyClass(producer.getClass()));
            return producer;
          });
      try (Producer<String, String> producer = plain.createProducer()) {
        assertThat(producer).isNotNull();
      }

      assertThat(plain.getPostProcessors().contains(KafkaTransactionSends.INSTANCE))
          .as("the starter's post-processor on a factory that is not transaction capable")
          .isFalse();
      assertThat(proxied).as("its producer, a counting proxy?").containsExactly(false);
      assertThat(transactional.getPostProcessors().contains(KafkaTransactionSends.INSTANCE))
          .as("the starter's post-processor on a transaction-capable factory")
          .isTrue();
      // the control: what that post-processor makes of a producer is seen as a proxy
      Producer<Object, Object> counted = KafkaTransactionSends.INSTANCE.apply(new MockProducer<>());
      assertThat(Proxy.isProxyClass(counted.getClass())).as("a counted producer").isTrue();
    } finally {
      plain.destroy();
      transactional.destroy();
    }
  }

  private static DefaultKafkaProducerFactory<String, String> factory(
      @Nullable String transactionIdPrefix) {
    Map<String, Object> config = new HashMap<>();
    // never connected to: no record is sent
    config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, "localhost:9");
    config.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
    config.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
    DefaultKafkaProducerFactory<String, String> factory = new DefaultKafkaProducerFactory<>(config);
    if (transactionIdPrefix != null) {
      factory.setTransactionIdPrefix(transactionIdPrefix);
    }
    return factory;
  }
}
