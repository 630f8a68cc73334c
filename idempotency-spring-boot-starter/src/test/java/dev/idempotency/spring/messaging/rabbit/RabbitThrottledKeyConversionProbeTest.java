package dev.idempotency.spring.messaging.rabbit;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.time.ZoneId;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.core.Declarables;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.rabbit.annotation.RabbitListener;
import org.springframework.aop.framework.ProxyFactory;
import org.springframework.aop.interceptor.ConcurrencyThrottleInterceptor;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.test.annotation.DirtiesContext;

/**
 * probeW, of fixproxy 7e9c3d17 ({@code ExpressionAttributes}), on a real RabbitMQ broker (Boot's
 * default container, requeue on failure), Boot 3.5 and 4.0: {@code
 * RabbitResilienceRejectedKeyConversionProbeTest}'s case (Boot 4.0's {@code @ConcurrencyLimit})
 * with spring-aop's own {@code ConcurrencyThrottleInterceptor}, which Spring Framework 6.2 has too.
 * A payload-keyed listener whose key converts the application's {@link Region} (a JDK proxy of the
 * throttle) to a {@link ZoneId} through its {@code toZoneId()}; at the first delivery the throttle
 * allows no call (limit 0: Spring's {@code IllegalStateException} before the look-up runs, only
 * Spring's and the JDK's frames above the conversion's, the proxy's among them), from the second on
 * it allows any. The message must be requeued and sent once, never dead-lettered unsent.
 */
@SpringBootTest(
    classes = RabbitThrottledKeyConversionProbeTest.App.class,
    properties = "logging.level.org.springframework.amqp.rabbit.listener=OFF")
@DirtiesContext
class RabbitThrottledKeyConversionProbeTest extends RabbitProbeSupport {

  static final String QUEUE = "idem.probe-w-throttled-key-conversion";

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
      "T(dev.idempotency.spring.messaging.rabbit.RabbitThrottledKeyConversionProbeTest$Keys)";

  public static class Listeners {
    /** Keyed by a conversion of the region, in Boot's container. */
    @RabbitListener(id = "probe-w-throttled-key-conversion", queues = QUEUE)
    @IdempotentListener(
        name = "probe-w-throttled-key-conversion",
        key = KEYS + ".ofZone(" + KEYS + ".region(#event), #event)")
    public void listen(String event) {
      sent.add(event);
    }
  }

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ListenerTestConfiguration.class)
  static class App {
    @Bean
    Listeners probeWThrottledListeners() {
      return new Listeners();
    }

    @Bean
    Region probeWThrottledRegion() {
      ProxyFactory proxies = new ProxyFactory(new RegionDirectory());
      proxies.addInterface(Region.class);
      proxies.addAdvice(THROTTLE);
      return (Region) proxies.getProxy();
    }

    @Bean
    Declarables probeWThrottledQueues() {
      return deadLetteredQueues(QUEUE);
    }
  }

  @Autowired Region region;

  @Override
  List<String> sends() {
    return sent;
  }

  @Test
  void aLookUpRefusedOnceBySpringsThrottleBeyondAProxyIsRequeuedAndSentOnce() throws Exception {
    assertThat(Proxy.isProxyClass(region.getClass()))
        .as("the region is a JDK proxy: " + region.getClass())
        .isTrue();
    Keys.region = region;
    String event = unique("region");
    plain.send("", QUEUE, withoutKey(event));
    await(
        "sent, or evaluated once and dead-lettered",
        () -> sent(event) >= 1 || attempts.containsKey(event) && attempts.get(event).get() >= 1);
    Message dead = null;
    if (sent(event) == 0) {
      // what the container did with the refused delivery: dead-lettered, or requeued and sent
      dead = plain.receive(QUEUE + DEAD_LETTERS, 2_000);
      if (dead == null) {
        await("sent after the refusal", () -> sent(event) >= 1);
      }
    }

    assertThat(dead == null ? null : new String(dead.getBody(), StandardCharsets.UTF_8))
        .as("dead-lettered (key evaluations: %s)", attempts.get(event))
        .isNull();
    assertThat(sent(event)).as("sends (key evaluations: %s)", attempts.get(event)).isEqualTo(1);
    assertThat(attempts.get(event)).as("key evaluations").hasValue(2);
  }
}
