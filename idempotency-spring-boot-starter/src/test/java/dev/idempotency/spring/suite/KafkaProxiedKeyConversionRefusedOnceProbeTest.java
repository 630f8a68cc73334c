package dev.idempotency.spring.suite;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.lang.reflect.Proxy;
import java.time.Duration;
import java.time.ZoneId;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;
import org.springframework.aop.framework.ProxyFactory;
import org.springframework.aop.interceptor.ConcurrencyThrottleInterceptor;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.core.ConsumerFactory;
import org.springframework.kafka.core.KafkaTemplate;

/**
 * probeW, of fixproxy 7e9c3d17 ({@code ExpressionAttributes}), on the shared in-JVM KRaft broker,
 * Boot 3.5 and 4.0: a Kafka record {@code @IdempotentListener} whose key converts the application's
 * {@link Region} to a {@link ZoneId} (the conversion service calls its {@code toZoneId()}), the
 * region an interface-based (JDK) proxy that spring-aop's own {@code
 * ConcurrencyThrottleInterceptor} guards. At the first delivery the throttle allows no call (its
 * limit 0: Spring's {@code IllegalStateException}, thrown before the application's look-up runs,
 * only Spring's and the JDK's frames above the conversion's, the proxy's among them); from the
 * second on it allows any. A refusal beyond a proxy is the called code's failure: the message must
 * come back and be sent once, never dead-lettered unsent as an invalid key (a lost send). The probe
 * of {@code RabbitResilienceRejectedKeyConversionProbeTest} (Boot 4.0's {@code @ConcurrencyLimit})
 * on Kafka and on Spring Framework 6.2 too.
 */
class KafkaProxiedKeyConversionRefusedOnceProbeTest {

  static final String LISTENER = "probe-w-proxied-key-conversion";

  static final List<String> sent = new CopyOnWriteArrayList<>();

  /** The key evaluations per payload (each delivery evaluates the key once). */
  static final Map<String, AtomicInteger> attempts = new ConcurrentHashMap<>();

  /** The throttle of the region's proxy. */
  static final ConcurrencyThrottleInterceptor THROTTLE = new ConcurrencyThrottleInterceptor();

  /** A region of the application's, whose zone is looked up (a remote directory). */
  public interface Region {
    /**
     * The region's zone, which the conversion service calls to convert a Region to a ZoneId.
     *
     * @return the zone
     */
    ZoneId toZoneId();
  }

  /** The directory's client. */
  public static class RegionDirectory implements Region {
    @Override
    public ZoneId toZoneId() {
      return ZoneId.of("Europe/Paris");
    }
  }

  /** The key's parts. */
  public static final class Keys {
    static volatile Region region;

    private Keys() {}

    /**
     * Counts an evaluation of the key; the throttle lets no call through at the first one, any at
     * the next ones.
     *
     * @param event the payload
     * @return the region bean (the proxy)
     */
    public static Region region(String event) {
      int attempt = attempts.computeIfAbsent(event, e -> new AtomicInteger()).incrementAndGet();
      THROTTLE.setConcurrencyLimit(attempt == 1 ? 0 : -1);
      return region;
    }

    /**
     * The key of a notice in a zone.
     *
     * @param zone the zone, converted from the Region with its toZoneId()
     * @param event the payload
     * @return the key
     */
    public static String ofZone(ZoneId zone, String event) {
      return "zone-" + zone.getId() + "-" + event;
    }
  }

  static final String KEYS =
      "T(dev.idempotency.spring.suite.KafkaProxiedKeyConversionRefusedOnceProbeTest$Keys)";

  @Configuration(proxyBeanMethods = false)
  static class ProxiedRegionListeners {
    @Bean
    NewTopic probeWProxiedTopic(@Value("${suite.kafka.topic}") String topic) {
      return new NewTopic(topic + ".proxied", 1, (short) 1);
    }

    @Bean
    NewTopic probeWProxiedDeadLetterTopic(@Value("${suite.kafka.topic}") String topic) {
      return new NewTopic(topic + ".proxied.DLT", 1, (short) 1);
    }

    @Bean
    Region probeWRegion() {
      ProxyFactory proxies = new ProxyFactory(new RegionDirectory());
      proxies.addInterface(Region.class);
      proxies.addAdvice(THROTTLE);
      return (Region) proxies.getProxy();
    }

    @Bean
    ProxiedRegionListener probeWProxiedRegionListener() {
      return new ProxiedRegionListener();
    }
  }

  /** Keyed by a conversion of the region. */
  public static class ProxiedRegionListener {
    @KafkaListener(
        id = LISTENER,
        topics = "${suite.kafka.topic}.proxied",
        groupId = "${suite.kafka.topic}.proxied")
    @IdempotentListener(
        name = LISTENER,
        key = KEYS + ".ofZone(" + KEYS + ".region(#event), #event)")
    public void listen(String event) {
      sent.add(event);
    }
  }

  @Test
  @SuppressWarnings("unchecked")
  void aLookUpRefusedOnceBySpringsThrottleBeyondAProxyComesBackAndIsSentOnce() throws Exception {
    String topic = "idem.probe-w-proxied-" + UUID.randomUUID();
    try (KafkaListenerApplication application =
        KafkaListenerApplication.start(
            new SwitchableKeyStore(),
            new SuiteProvider(),
            new CountDownLatch(1),
            topic,
            "none",
            new Class<?>[] {ProxiedRegionListeners.class})) {
      Region region = application.context().getBean(Region.class);
      assertThat(Proxy.isProxyClass(region.getClass()))
          .as("the region is a JDK proxy: " + region.getClass())
          .isTrue();
      Keys.region = region;
      String event = "region-" + UUID.randomUUID();
      KafkaTemplate<String, String> template = application.context().getBean(KafkaTemplate.class);
      template.send(new ProducerRecord<>(topic + ".proxied", event)).get(30, TimeUnit.SECONDS);
      // a later message behind it on the partition: the first one was handled for good (sent or
      // dead-lettered) when this one is sent
      String later = "region-later-" + UUID.randomUUID();
      template.send(new ProducerRecord<>(topic + ".proxied", later)).get(30, TimeUnit.SECONDS);
      Waits.await("the later message sent", () -> sent.contains(later));

      assertThat(deadLettered(application, topic))
          .as("dead-lettered (key evaluations: %s)", attempts.get(event))
          .isEmpty();
      assertThat(sent.stream().filter(event::equals).count())
          .as("sends (key evaluations: %s)", attempts.get(event))
          .isEqualTo(1);
      assertThat(attempts.get(event)).as("key evaluations").hasValue(2);
    }
  }

  @SuppressWarnings("unchecked")
  private static List<String> deadLettered(KafkaListenerApplication application, String topic) {
    ConsumerFactory<String, String> consumers =
        application.context().getBean(ConsumerFactory.class);
    TopicPartition partition = new TopicPartition(topic + ".proxied.DLT", 0);
    List<String> payloads = new ArrayList<>();
    try (Consumer<String, String> consumer =
        consumers.createConsumer("probe-w-dlt-reader-" + UUID.randomUUID(), null)) {
      consumer.assign(List.of(partition));
      consumer.seekToBeginning(List.of(partition));
      long end = consumer.endOffsets(List.of(partition)).get(partition);
      while (consumer.position(partition) < end) {
        for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
          payloads.add(record.value());
        }
      }
    }
    return payloads;
  }
}
