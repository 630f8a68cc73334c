package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.BoundedExchange;
import dev.idempotency.spring.Idempotent;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.lang.reflect.Proxy;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.time.ZoneId;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.resilience.annotation.ConcurrencyLimit;
import org.springframework.resilience.annotation.EnableResilientMethods;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;

/**
 * Probe (probeT, of fixconv 9eea31e6 and b113f8e9): a look-up that a key's argument conversion
 * calls, guarded by Spring Framework 7's own {@code @ConcurrencyLimit(policy = REJECT)} on an
 * interface-based (JDK) proxy, is refused once because the limit is taken (by another caller, still
 * inside it): Spring's {@code InvocationRejectedException}, a {@code RejectedExecutionException}, a
 * "try later" by its nature, thrown before the application's look-up runs. The conversion service
 * converts the {@link Region} argument to the key function's {@link ZoneId} by calling its {@code
 * toZoneId()} through the proxy: every frame above the conversion's is the JDK's (the proxy class,
 * reflection) or Spring's (spring-aop, spring-core's ConcurrencyThrottleSupport, spring-context's
 * org.springframework.resilience). Spring Framework 7 only (Boot 4.0): lives in
 * spring-boot-4-tests. Real HTTP through a real Boot application (Spring MVC).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ResilienceRejectedKeyConversionProbeTest {

  static final HttpClient HTTP =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

  private ConfigurableApplicationContext app;

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
   * The directory's client: at most one look-up at a time, the others refused at once (Spring's
   * {@code @ConcurrencyLimit}, REJECT). A look-up made on a thread named "holder" stays inside
   * until released.
   */
  public static class RegionDirectory implements Region {
    static final CountDownLatch inside = new CountDownLatch(1);
    static final CountDownLatch release = new CountDownLatch(1);
    static final AtomicInteger lookUps = new AtomicInteger();

    @Override
    @ConcurrencyLimit(limit = 1, policy = ConcurrencyLimit.ThrottlePolicy.REJECT)
    public ZoneId toZoneId() {
      lookUps.incrementAndGet();
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

  /** The key function: its ZoneId parameter has SpEL convert the Region argument. */
  public static final class Keys {
    private Keys() {}

    /**
     * The key of a notice in a zone.
     *
     * @param zone the zone, converted from the Region argument with its toZoneId()
     * @param event the event
     * @return the key
     */
    public static String ofZone(ZoneId zone, String event) {
      return "zone-" + zone.getId() + "-" + event;
    }
  }

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @EnableResilientMethods(proxyTargetClass = false)
  @Import({Notifier.class, Controller.class})
  static class App {
    @Bean
    SwitchableKeyStore switchableKeyStore() {
      return new SwitchableKeyStore();
    }

    @Bean
    RegionDirectory regionDirectory() {
      return new RegionDirectory();
    }
  }

  /** The notifier: each call that runs is a send. The bean is a proxy: state through methods. */
  static class Notifier {
    private final Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();

    @Idempotent(
        key =
            "T(dev.idempotency.spring.web.ResilienceRejectedKeyConversionProbeTest$Keys)"
                + ".ofZone(#region, #event)")
    public String send(Region region, String event) {
      return "sent-" + sends.computeIfAbsent(event, e -> new AtomicInteger()).incrementAndGet();
    }

    public int sends(String event) {
      AtomicInteger count = sends.get(event);
      return count == null ? 0 : count.get();
    }
  }

  @RestController
  static class Controller {
    private final Notifier notifier;
    private final Region region;

    Controller(Notifier notifier, Region region) {
      this.notifier = notifier;
      this.region = region;
    }

    @PostMapping("/notify/{event}")
    String send(@PathVariable String event) {
      return notifier.send(region, event);
    }
  }

  @BeforeAll
  void start() {
    app =
        new SpringApplicationBuilder(App.class)
            .properties(
                "server.port=0",
                "spring.main.banner-mode=off",
                // interface-based proxies (Boot's default is CGLIB's, named after the class)
                "spring.aop.proxy-target-class=false")
            .run();
  }

  @AfterAll
  void stop() {
    RegionDirectory.release.countDown();
    if (app != null) {
      app.close();
    }
  }

  /*
   * Was an open finding, fixed by fixproxy: ExpressionAttributes takes a proxy's frame (a jdk.proxy
   * class, JdkDynamicAopProxy, ReflectiveMethodInvocation, a CGLIB proxy's) between the conversion
   * and the throw for the called code's boundary, and what was thrown beyond it for the called
   * code's failure. The finding (probeT, of b113f8e9; severity: lost send in SPEC 1's terms). Expected: the
   * refused look-up is the look-up's own failure, which passes (the limit frees when the other
   * caller leaves): a 5xx, the key released, and the client's retry sends once. Happened on Boot
   * 4.0.7 (Spring Framework 7.0.8), probeT on 65abfa8f: 400 /problems/malformed-key ("the idempotency key
   * is not a valid key (EL1029E ... 'ofZone' ...)"), the look-up never ran; the client, told its
   * request is bad, does not retry: a lost send, though the same request answers 200 once the
   * limit frees. Why: InvocationRejectedException is thrown by spring-context's
   * org.springframework.resilience interceptor (a Spring jar: Spring's), under spring-core's
   * ConcurrencyThrottleSupport and spring-aop's JdkDynamicAopProxy, the jdk.proxy class and
   * reflection (the JDK's), above the conversion service: no frame
   * ExpressionAttributes.thrownFromApplicationCode counts as the application's, so the refusal is
   * taken for the conversion's verdict on the value. Any Spring interceptor on an interface-based
   * proxy that refuses a call before the application's code runs does the same (not tried: a
   * CGLIB proxy, Boot's default, whose class is named after the application's and would count as
   * its code). Boot 3.5 (Spring 6.2) has no @ConcurrencyLimit: not run there.
   */
  @Test
  void aLookUpRefusedOnceBySpringsConcurrencyLimitIsRetriedNotAnInvalidKey() throws Exception {
    Region region = app.getBean(Region.class);
    assertThat(Proxy.isProxyClass(region.getClass()))
        .as("the region is a JDK proxy: " + region.getClass())
        .isTrue();
    String event = "region-" + UUID.randomUUID().toString().substring(0, 8);
    Thread holder = new Thread(region::toZoneId, "holder");
    HttpResponse<String> first;
    int lookUpsBefore;
    holder.start();
    try {
      assertThat(RegionDirectory.inside.await(60, TimeUnit.SECONDS))
          .as("the other caller is inside the limit")
          .isTrue();
      lookUpsBefore = RegionDirectory.lookUps.get();
      first = post(event);
      assertThat(RegionDirectory.lookUps)
          .as("the request's look-up was refused before it ran")
          .hasValue(lookUpsBefore);
    } finally {
      RegionDirectory.release.countDown();
      holder.join(60_000);
    }
    HttpResponse<String> retry = post(event);

    assertThat(first.statusCode())
        .as("the first call, its look-up refused (limit taken): " + first.body())
        .isEqualTo(500);
    assertThat(retry.statusCode()).as("the client's retry: " + retry.body()).isEqualTo(200);
    assertThat(app.getBean(Notifier.class).sends(event)).as("sends").isEqualTo(1);
  }

  private HttpResponse<String> post(String event) throws Exception {
    int port = app.getEnvironment().getProperty("local.server.port", Integer.class);
    HttpRequest request =
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/notify/" + event))
            .timeout(Duration.ofSeconds(60))
            .POST(HttpRequest.BodyPublishers.noBody())
            .build();
    return BoundedExchange.send(HTTP, request, HttpResponse.BodyHandlers.ofString());
  }
}
