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
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.core.Declarables;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.rabbit.annotation.RabbitListener;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.resilience.annotation.ConcurrencyLimit;
import org.springframework.resilience.annotation.EnableResilientMethods;
import org.springframework.test.annotation.DirtiesContext;

/**
 * Probe (probeT, of fixconv 9eea31e6 and b113f8e9), the listener's side of
 * ResilienceRejectedKeyConversionProbeTest, on a real RabbitMQ broker (Boot's default container,
 * requeue on failure): a payload-keyed listener whose key converts the application's {@link Region}
 * (a JDK proxy of Spring Framework 7's {@code @ConcurrencyLimit(policy = REJECT)}) to a {@link
 * ZoneId} through its {@code toZoneId()}; the limit is taken by another caller when the message
 * arrives, so the look-up is refused ({@code InvocationRejectedException}) before it runs. Spring
 * Framework 7 only (Boot 4.0): lives in spring-boot-4-tests.
 */
@SpringBootTest(
    classes = RabbitResilienceRejectedKeyConversionProbeTest.App.class,
    properties = {
      "logging.level.org.springframework.amqp.rabbit.listener=OFF",
      "spring.aop.proxy-target-class=false"
    })
@DirtiesContext
class RabbitResilienceRejectedKeyConversionProbeTest extends RabbitProbeSupport {

  static final String QUEUE = "idem.resilience-rejected-key-conversion-probe";

  static final List<String> sent = new CopyOnWriteArrayList<>();

  /** The key evaluations per payload (each delivery evaluates the key once). */
  static final Map<String, AtomicInteger> attempts = new ConcurrentHashMap<>();

  /** A region of the application's, whose zone is looked up (a remote directory). */
  public interface Region {
    /**
     * The region's zone, which the conversion service calls to convert a Region to a ZoneId.
     *
     * @return the zone
     */
    // on the interface too: the interceptor reads the annotation off the method the proxy was
    // called with (the interface's); on the class, for the advisor's pointcut
    @ConcurrencyLimit(limit = 1, policy = ConcurrencyLimit.ThrottlePolicy.REJECT)
    ZoneId toZoneId();
  }

  /**
   * The directory's client: at most one look-up at a time, the others refused at once. A look-up
   * made on a thread named "holder" stays inside until released.
   */
  public static class RegionDirectory implements Region {
    static final CountDownLatch inside = new CountDownLatch(1);
    static final CountDownLatch release = new CountDownLatch(1);

    @Override
    @ConcurrencyLimit(limit = 1, policy = ConcurrencyLimit.ThrottlePolicy.REJECT)
    public ZoneId toZoneId() {
      if (Thread.currentThread().getName().equals("holder")) {
        inside.countDown();
        try {
          release.await(60, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
      return ZoneId.of("Europe/Paris");
    }
  }

  /** The key's parts. */
  public static final class Keys {
    static volatile Region region;

    private Keys() {}

    /**
     * Counts an evaluation of the key.
     *
     * @param event the payload
     * @return the region bean (the Spring proxy)
     */
    public static Region region(String event) {
      attempts.computeIfAbsent(event, e -> new AtomicInteger()).incrementAndGet();
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
      "T(dev.idempotency.spring.messaging.rabbit"
          + ".RabbitResilienceRejectedKeyConversionProbeTest$Keys)";

  public static class Listeners {
    /** Keyed by a conversion of the region, in Boot's container. */
    @RabbitListener(id = "resilience-rejected-key-conversion-probe", queues = QUEUE)
    @IdempotentListener(
        name = "resilience-rejected-key-conversion-probe",
        key = KEYS + ".ofZone(" + KEYS + ".region(#event), #event)")
    public void listen(String event) {
      sent.add(event);
    }
  }

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @EnableResilientMethods(proxyTargetClass = false)
  @Import(ListenerTestConfiguration.class)
  static class App {
    @Bean
    Listeners resilienceRejectedProbeListeners() {
      return new Listeners();
    }

    @Bean
    RegionDirectory regionDirectory() {
      return new RegionDirectory();
    }

    @Bean
    Declarables resilienceRejectedProbeQueues() {
      return deadLetteredQueues(QUEUE);
    }
  }

  @Autowired Region region;

  @Override
  List<String> sends() {
    return sent;
  }

  @AfterAll
  static void release() {
    RegionDirectory.release.countDown();
  }

  /*
   * Was an open finding, fixed by fixproxy (a proxy's frame between the conversion and the throw
   * makes it the called code's failure, as in ResilienceRejectedKeyConversionProbeTest). The
   * finding (probeT, of b113f8e9; severity: lost send in SPEC 1's terms). Expected: the
   * refused look-up is the look-up's own failure, which passes when the other caller leaves the
   * limit: the message requeued, then sent once, never dead-lettered. Happened on Boot 4.0.7
   * (Spring Framework 7.0.8, spring-rabbit 4.0.4), probeT on 65abfa8f: the message dead-lettered after
   * one delivery (key evaluations: 1), never sent: rejected without requeue as a poison message
   * (an invalid key), though the look-up works once the other caller leaves the limit. Why: as in
   * ResilienceRejectedKeyConversionProbeTest, the InvocationRejectedException carries only Spring's
   * and the JDK's frames above the conversion service's, so ExpressionAttributes takes the refusal
   * for the conversion's verdict on the value. Boot 3.5 (Spring 6.2) has no @ConcurrencyLimit: not
   * run there.
   */
  @Test
  void aLookUpRefusedOnceBySpringsConcurrencyLimitIsRequeuedAndSentOnce() throws Exception {
    assertThat(Proxy.isProxyClass(region.getClass()))
        .as("the region is a JDK proxy: " + region.getClass())
        .isTrue();
    Keys.region = region;
    String event = unique("region");
    Thread holder = new Thread(region::toZoneId, "holder");
    holder.start();
    Message dead;
    try {
      assertThat(RegionDirectory.inside.await(60, TimeUnit.SECONDS))
          .as("the other caller is inside the limit")
          .isTrue();
      plain.send("", QUEUE, withoutKey(event));
      await("the key evaluated", () -> attempts.containsKey(event));
      // what the container did with the refused delivery: dead-lettered, or requeued
      dead = plain.receive(QUEUE + DEAD_LETTERS, 2_000);
    } finally {
      RegionDirectory.release.countDown();
      holder.join(60_000);
    }
    if (dead == null) {
      await("sent after the limit freed", () -> sent(event) >= 1);
    }

    assertThat(dead == null ? null : new String(dead.getBody(), StandardCharsets.UTF_8))
        .as("dead-lettered (key evaluations: %s)", attempts.get(event))
        .isNull();
    assertThat(sent(event)).as("sends").isEqualTo(1);
  }
}
