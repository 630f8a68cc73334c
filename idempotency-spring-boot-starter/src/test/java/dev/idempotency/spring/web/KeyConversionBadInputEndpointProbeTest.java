package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.BoundedExchange;
import dev.idempotency.spring.Idempotent;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.time.ZoneId;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.http.MediaType;
import org.springframework.util.MimeType;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;

/**
 * Probe (probeP, of 9eea31e6), the other direction of KeyConversionFramesEndpointProbeTest: a
 * genuinely bad input whose key conversion fails the same way every time must stay the input's
 * failure (a 400 /problems/malformed-key, nothing sent; on a message listener a poison message,
 * rejected), never be taken for the called code's (a 5xx the client retries for ever; on RabbitMQ a
 * requeue loop). 9eea31e6 counts as Spring's only the packages a conversion runs through (core,
 * util, beans, expression, cglib, aop): a conversion that calls a Spring type's own factory method
 * in another package fails from frames it counts as the application's. The key's argument is
 * converted by SpEL's conversion service from the String path variable: to a {@link ZoneId} (the
 * JDK's {@code of}), a {@link MimeType} (spring-core's {@code valueOf}, org.springframework.util)
 * and a {@link MediaType} (spring-web's {@code valueOf}, org.springframework.http). The value is
 * never a zone nor a type (no '/'): a bad key every time. Real HTTP through a real Boot application
 * (Spring MVC).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class KeyConversionBadInputEndpointProbeTest {

  static final HttpClient HTTP =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

  /** The key expression over a String parameter {@code #event}, the conversion by its prefix. */
  static final String KEY =
      "#event.startsWith('zone') ? T(dev.idempotency.spring.web"
          + ".KeyConversionBadInputEndpointProbeTest$Keys).zoneKey(#event) : (#event.startsWith("
          + "'mime') ? T(dev.idempotency.spring.web.KeyConversionBadInputEndpointProbeTest$Keys)"
          + ".mimeKey(#event) : T(dev.idempotency.spring.web"
          + ".KeyConversionBadInputEndpointProbeTest$Keys).mediaKey(#event))";

  private ConfigurableApplicationContext app;

  /** The keys, each of a parameter the conversion service converts the String event to. */
  public static final class Keys {
    private Keys() {}

    /**
     * The key of a zone's notice.
     *
     * @param zone the zone, converted with ZoneId.of
     * @return the key
     */
    public static String zoneKey(ZoneId zone) {
      return "zone-" + zone.getId();
    }

    /**
     * The key of a MIME type's notice.
     *
     * @param type the type, converted with MimeType.valueOf
     * @return the key
     */
    public static String mimeKey(MimeType type) {
      return "mime-" + type;
    }

    /**
     * The key of a media type's notice.
     *
     * @param type the type, converted with MediaType.valueOf
     * @return the key
     */
    public static String mediaKey(MediaType type) {
      return "media-" + type;
    }
  }

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import({Notifier.class, Controller.class})
  static class App {
    @Bean
    SwitchableKeyStore switchableKeyStore() {
      return new SwitchableKeyStore();
    }
  }

  /** The notifier: each call that runs is a send. The bean is a proxy: state through methods. */
  static class Notifier {
    private final Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();

    @Idempotent(key = KEY)
    public String send(String event) {
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

    Controller(Notifier notifier) {
      this.notifier = notifier;
    }

    @PostMapping("/notify/{event}")
    String send(@PathVariable String event) {
      return notifier.send(event);
    }
  }

  @BeforeAll
  void start() {
    app =
        new SpringApplicationBuilder(App.class)
            .properties("server.port=0", "spring.main.banner-mode=off")
            .run();
  }

  @AfterAll
  void stop() {
    if (app != null) {
      app.close();
    }
  }

  /**
   * The conversion fails in the JDK's code (ZoneId.of: no such zone) or spring-core's
   * (MimeType.valueOf: no '/'): a 400 malformed-key, twice, nothing sent. Held on Boot 3.5 and 4.0
   * (probeP, on 7efd6b9a).
   */
  @ParameterizedTest
  @ValueSource(strings = {"zone", "mime"})
  void aBadInputConvertedByTheJdksOrSpringCoresCodeIsA400(String kind) throws Exception {
    assertABadKeyEveryTime(kind);
  }

  /*
   * Was an open finding, fixed by fixconv: ExpressionAttributes tells Spring's classes outside the
   * packages a conversion runs through by the jar they came from (its manifest's title, as their
   * class loader read it), not by their package, so spring-web's MediaType is Spring's and
   * org.springframework.samples (compiled into the application) stays the application's. After the
   * fix: 400 twice, no send, on Boot 3.5 and 4.0. The finding (probeP, of 9eea31e6; severity other in SPEC 1's terms: no second send and no
   * lost send, the key is bad every time and nothing can be sent for it; but a poison input is
   * taken for a transient failure: an HTTP client is told to retry (5xx) for ever, and on a
   * listener the same classification means retried: a RabbitMQ requeue loop, Kafka's retries
   * before its recoverer; the listener side was not run). The same bad value as the "mime" row,
   * converted with spring-web's MediaType.valueOf, which throws InvalidMediaTypeException from
   * MediaType.parseMediaType (org.springframework.http, a package
   * ExpressionAttributes.isPlatformOrSpring no longer counts as Spring's since 9eea31e6): taken for
   * the called code's failure. Expected: 400 /problems/malformed-key twice, no send. Happened on
   * Boot 3.5.7 and 4.0.7 (probeP, on 7efd6b9a): 500 ("Internal Server Error"), nothing sent; the
   * "zone" and "mime" rows gave 400. With ExpressionAttributes.java as at 9eea31e6^ (every
   * org.springframework. frame Spring's) all three rows gave 400 on both lines: a regression of
   * 9eea31e6. Any Spring type outside core, util, beans, expression, cglib and aop whose
   * valueOf/of/from(String) or String constructor rejects its input does the same. A fix could tell
   * Spring's own classes by where they were loaded from (the org.springframework jars' code
   * source) rather than by package name, so that org.springframework.samples stays the
   * application's and org.springframework.http stays Spring's.
   */
  @Test
  void aBadInputConvertedBySpringWebsMediaTypeIsA400() throws Exception {
    assertABadKeyEveryTime("media");
  }

  private void assertABadKeyEveryTime(String kind) throws Exception {
    String event = kind + "-" + UUID.randomUUID().toString().substring(0, 8);
    HttpResponse<String> first = post(event);
    HttpResponse<String> again = post(event);

    assertThat(first.statusCode()).as("the first call: " + first.body()).isEqualTo(400);
    assertThat(first.body()).contains("/problems/malformed-key");
    assertThat(again.statusCode()).as("the same call again: " + again.body()).isEqualTo(400);
    assertThat(app.getBean(Notifier.class).sends(event)).as("sends").isZero();
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
