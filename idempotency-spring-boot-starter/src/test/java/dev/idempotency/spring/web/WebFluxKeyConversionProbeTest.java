package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.BoundedExchange;
import dev.idempotency.spring.Idempotent;
import dev.idempotency.spring.KeyConversionLookUps;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import dev.idempotency.spring.reactive.NettyServer;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.data.redis.connection.stream.RecordId;
import org.springframework.http.MediaType;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;
import reactor.core.publisher.Mono;

/**
 * Probe (probeT, of fixconv 9eea31e6 and b113f8e9) on WebFlux over Reactor Netty, which the frames
 * rule's probes had not reached: a controller returns an {@code @Idempotent} method's Mono, whose
 * key expression converts its String argument. Two directions. The application's look-ups of {@link
 * KeyConversionLookUps} that time out once (a type under org.springframework.samples, one under
 * kotlin., a future joined after orTimeout, a stackless exception, a JDK proxy's handler): the
 * called code's failure, a 500, and the client's retry sends once. A value that a Spring type
 * outside the conversion's six packages refuses the same way every time (spring-web's {@code
 * MediaType.valueOf}: no '/'; Spring Data Redis's {@code RecordId.of}: no '-'): a 400
 * /problems/malformed-key twice, nothing sent. Real HTTP through a real Boot application.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class WebFluxKeyConversionProbeTest {

  static final HttpClient HTTP =
      HttpClient.newBuilder()
          .version(HttpClient.Version.HTTP_1_1)
          .connectTimeout(Duration.ofSeconds(10))
          .build();

  static final String KEYS = "T(dev.idempotency.spring.web.WebFluxKeyConversionProbeTest$Keys)";

  /** The bad inputs' rows by their prefix, then KeyConversionLookUps' rows. */
  static final String KEY =
      "#event.startsWith('media') ? "
          + KEYS
          + ".mediaKey(#event) : (#event.startsWith('record') ? "
          + KEYS
          + ".recordKey(#event) : ("
          + KeyConversionLookUps.KEY
          + "))";

  private ConfigurableApplicationContext app;

  /** The keys of the bad inputs' rows. */
  public static final class Keys {
    private Keys() {}

    /**
     * The key of a media type's notice.
     *
     * @param type the type, converted with spring-web's MediaType.valueOf
     * @return the key
     */
    public static String mediaKey(MediaType type) {
      return "media-" + type;
    }

    /**
     * The key of a stream record's notice.
     *
     * @param id the record's id, converted with Spring Data Redis's RecordId.of
     * @return the key
     */
    public static String recordKey(RecordId id) {
      return "record-" + id.getValue();
    }
  }

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import({NettyServer.class, Notifier.class, Controller.class})
  static class App {
    @Bean
    SwitchableKeyStore switchableKeyStore() {
      return new SwitchableKeyStore();
    }
  }

  /** The notifier: each Mono that runs is a send. The bean is a proxy: state through methods. */
  static class Notifier {
    private final Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();

    @Idempotent(key = KEY)
    public Mono<String> send(String event) {
      return Mono.fromSupplier(
          () -> "sent-" + sends.computeIfAbsent(event, e -> new AtomicInteger()).incrementAndGet());
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
    Mono<String> send(@PathVariable String event) {
      return notifier.send(event);
    }
  }

  @BeforeAll
  void start() {
    app =
        new SpringApplicationBuilder(App.class)
            .properties(
                "server.port=0",
                "spring.main.web-application-type=reactive",
                "spring.main.banner-mode=off")
            .run();
  }

  @AfterAll
  void stop() {
    if (app != null) {
      app.close();
    }
  }

  /** The application's look-up fails once: a 500, and the client's retry sends once. */
  @ParameterizedTest
  @ValueSource(strings = {"pet", "plan", "shop", "region"})
  void aLookUpThatFailsOnceIsA500AndTheRetrySendsOnce(String kind) throws Exception {
    String event = kind + "-" + UUID.randomUUID().toString().substring(0, 8);
    AtomicInteger failures =
        switch (kind) {
          case "pet" -> org.springframework.samples.idempotencyprobe.PetType.failures;
          case "plan" -> kotlin.idempotencyprobe.Plan.failures;
          case "shop" -> KeyConversionLookUps.Shop.failures;
          default -> KeyConversionLookUps.Region.failures;
        };
    HttpResponse<String> first;
    failures.set(1);
    try {
      first = post(event);
      assertThat(failures).as("the look-up ran and failed once").hasValue(0);
    } finally {
      failures.set(0);
    }
    HttpResponse<String> retry = post(event);

    assertThat(first.statusCode())
        .as("the first call, its look-up timed out: " + first.body())
        .isEqualTo(500);
    assertThat(retry.statusCode()).as("the client's retry: " + retry.body()).isEqualTo(200);
    assertThat(app.getBean(Notifier.class).sends(event)).as("sends").isEqualTo(1);
  }

  /** A value a Spring type refuses every time: a 400 malformed-key, twice, nothing sent. */
  @ParameterizedTest
  @ValueSource(strings = {"media", "record"})
  void aBadInputRefusedBySpringsTypeIsA400(String kind) throws Exception {
    // no '/' (not a media type) and no '-' (not a stream record's id)
    String event = kind + UUID.randomUUID().toString().replace("-", "").substring(0, 8);
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
