package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.BoundedExchange;
import java.lang.reflect.Proxy;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.time.ZoneId;
import java.util.UUID;
import java.util.function.ToIntFunction;
import org.springframework.aop.framework.ProxyFactory;
import org.springframework.aop.interceptor.ConcurrencyThrottleInterceptor;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * What the probes of a key converted from a region behind spring-aop's throttle share, on Spring
 * MVC ({@link ThrottledKeyConversionEndpointProbeTest}) and on WebFlux ({@link
 * WebFluxThrottledKeyConversionProbeTest}): the application's {@link Region}, an interface-based
 * (JDK) proxy guarded by a {@link ConcurrencyThrottleInterceptor}; the key's parts ({@link Keys},
 * whose {@link #KEY} converts the region to a {@link ZoneId}); and the check itself: a first call
 * whose look-up the closed throttle refuses is a 5xx, and the client's retry sends once.
 *
 * <p>The region and the throttle are static (the key's expression reaches them by type): one
 * application at a time, as the starter's tests run one class at a time in a JVM.
 */
final class ThrottledRegionProbes {

  static final HttpClient HTTP =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

  /** The throttle of the region's proxy: open (no limit) but while a check closes it. */
  static final ConcurrencyThrottleInterceptor THROTTLE = new ConcurrencyThrottleInterceptor();

  private static final String KEYS = "T(dev.idempotency.spring.web.ThrottledRegionProbes$Keys)";

  /** The notifier's key: the event's region, converted to its zone, and the event. */
  static final String KEY = KEYS + ".ofZone(" + KEYS + ".region(#event), #event)";

  private ThrottledRegionProbes() {}

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
     * The region bean (the proxy).
     *
     * @param event the event
     * @return the region
     */
    public static Region region(String event) {
      return region;
    }

    /**
     * The key of a notice in a zone.
     *
     * @param zone the zone, converted from the Region with its toZoneId()
     * @param event the event
     * @return the key
     */
    public static String ofZone(ZoneId zone, String event) {
      return "zone-" + zone.getId() + "-" + event;
    }
  }

  /** The region bean: the directory behind a JDK proxy guarded by {@link #THROTTLE}. */
  static Region throttledRegion() {
    ProxyFactory proxies = new ProxyFactory(new RegionDirectory());
    proxies.addInterface(Region.class);
    proxies.addAdvice(THROTTLE);
    return (Region) proxies.getProxy();
  }

  /** The key's expression reads the region bean of {@code app}. */
  static void useRegionOf(ConfigurableApplicationContext app) {
    Keys.region = app.getBean(Region.class);
  }

  /**
   * Posts an event to {@code app} with the throttle closed (its look-up refused), then again (the
   * client's retry): the first is a 500, the retry a 200, and the event was sent once.
   *
   * @param sends how often the application's notifier sent an event
   */
  static void assertRefusedOnceThenSentOnce(
      ConfigurableApplicationContext app, ToIntFunction<String> sends) throws Exception {
    assertThat(Proxy.isProxyClass(Keys.region.getClass()))
        .as("the region is a JDK proxy: " + Keys.region.getClass())
        .isTrue();
    String event = "region-" + UUID.randomUUID().toString().substring(0, 8);
    HttpResponse<String> first;
    THROTTLE.setConcurrencyLimit(0);
    try {
      first = post(app, event);
    } finally {
      THROTTLE.setConcurrencyLimit(-1);
    }
    HttpResponse<String> retry = post(app, event);

    assertThat(first.statusCode())
        .as("the first call, its look-up refused by the throttle: " + first.body())
        .isEqualTo(500);
    assertThat(retry.statusCode()).as("the client's retry: " + retry.body()).isEqualTo(200);
    assertThat(sends.applyAsInt(event)).as("sends").isEqualTo(1);
  }

  private static HttpResponse<String> post(ConfigurableApplicationContext app, String event)
      throws Exception {
    int port = app.getEnvironment().getProperty("local.server.port", Integer.class);
    HttpRequest request =
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/notify/" + event))
            .timeout(Duration.ofSeconds(60))
            .POST(HttpRequest.BodyPublishers.noBody())
            .build();
    return BoundedExchange.send(HTTP, request, HttpResponse.BodyHandlers.ofString());
  }
}
