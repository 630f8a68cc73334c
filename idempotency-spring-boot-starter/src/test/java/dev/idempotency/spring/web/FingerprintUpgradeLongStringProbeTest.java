package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.EmbeddedServers;
import dev.idempotency.spring.JsonCodecs;
import dev.idempotency.spring.autoconfigure.WebFluxAutoConfigurations;
import dev.idempotency.spring.reactive.NettyServer;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.WebApplicationType;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;

/**
 * Was an open finding, fixed (fixfp: the streamed path reads a string past the mapper's limit as
 * the tree does; an out-of-range number is an IllegalArgumentException on both) (probeY, low), end
 * to end over HTTP: the upgrade to the streamed fingerprint (8c58251) on an application whose
 * mapper limits string length ({@code StreamReadConstraints.maxStringLength(1000)}; Jackson's
 * default is 20M chars). Two WebFlux applications on one Redis: "before" fingerprints as the
 * starter did before (a {@link JsonCodecs} of the same mapper that only reads the tree, the
 * interface's default), "after" with the starter's codecs on the same mapper. After 24 bodies
 * within the limit (a 1,000-char string) to "after", a JSON body with a longer string is sent once
 * to "before" (200, sent), then retried under the same key to "after": expected a replay, got 422
 * key-reused for 1,001 chars (the tree's {@code getText()} checks the limit and fails, so "before"
 * stored the body's byte fingerprint; the stream reads the characters without it, and the parser's
 * own check, made only as a text buffer segment fills, misses a string that fits one recycled,
 * grown segment: the canonical fingerprint). Without the warm-up bodies the fresh buffers fill and
 * both fail alike. Fails on Boot 3.5 (Jackson 2) and 4.0 (Jackson 3): "Expecting empty but was:
 * ["1001 chars: 422 {..."type":"/problems/key-reused"...}"]". The short-string case passes.
 */
class FingerprintUpgradeLongStringProbeTest {

  static final HttpClient CLIENT =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();

  static ConfigurableApplicationContext before;
  static ConfigurableApplicationContext after;

  @Configuration(proxyBeanMethods = false)
  @Import({NettyServer.class, WebFluxAutoConfigurations.class})
  static class App {
    @Bean(destroyMethod = "shutdown")
    RedisClient redisClient() {
      return RedisClient.create(RedisURI.create("127.0.0.1", EmbeddedServers.redisPort()));
    }
  }

  /** A guarded handler that reads its JSON body, as a notification endpoint does. */
  @org.springframework.web.bind.annotation.RestController
  public static class Notify {
    static final Map<String, java.util.concurrent.atomic.AtomicInteger> runs =
        new java.util.concurrent.ConcurrentHashMap<>();

    @org.springframework.web.bind.annotation.PostMapping("/notify/{id}")
    @IdempotentEndpoint
    public Map<String, Object> notify(
        @org.springframework.web.bind.annotation.PathVariable String id,
        @org.springframework.web.bind.annotation.RequestBody Map<String, Object> body) {
      int run =
          runs.computeIfAbsent(id, ignored -> new java.util.concurrent.atomic.AtomicInteger())
              .incrementAndGet();
      return Map.of("receipt", "r-" + id, "run", run);
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class Before {
    @Bean
    JsonCodecs treeOnlyCodecs() {
      return StreamingFingerprintEdgesProbeTest.treeOnly(limited());
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class After {
    @Bean
    JsonCodecs streamingCodecs() {
      return limited();
    }
  }

  /** The starter's codecs on the application's mapper, whose strings are limited to 1,000 chars. */
  static JsonCodecs limited() {
    try {
      return J3.limited();
    } catch (LinkageError noJackson3) {
      return J2.limited();
    }
  }

  static final class J3 {
    static JsonCodecs limited() {
      return new dev.idempotency.spring.Jackson3JsonCodecs(
          tools.jackson.databind.json.JsonMapper.builder(
                  tools.jackson.core.json.JsonFactory.builder()
                      .streamReadConstraints(
                          tools.jackson.core.StreamReadConstraints.builder()
                              .maxStringLength(1000)
                              .build())
                      .build())
              .build());
    }
  }

  static final class J2 {
    static JsonCodecs limited() {
      return new dev.idempotency.spring.Jackson2JsonCodecs(
          new com.fasterxml.jackson.databind.ObjectMapper(
              com.fasterxml.jackson.core.JsonFactory.builder()
                  .streamReadConstraints(
                      com.fasterxml.jackson.core.StreamReadConstraints.builder()
                          .maxStringLength(1000)
                          .build())
                  .build()));
    }
  }

  @BeforeAll
  static void start() {
    before = run(Before.class);
    after = run(After.class);
  }

  private static ConfigurableApplicationContext run(Class<?> codecs) {
    SpringApplication application = new SpringApplication(App.class, Notify.class, codecs);
    application.setWebApplicationType(WebApplicationType.REACTIVE);
    application.setDefaultProperties(
        Map.of(
            "server.port", "0",
            "server.address", "127.0.0.1",
            "idempotency.store", "redis",
            "idempotency.in-flight-wait", "100ms",
            "idempotency.lease", "3s",
            "spring.main.banner-mode", "off",
            "spring.jmx.enabled", "false"));
    return application.run();
  }

  @AfterAll
  static void stop() {
    for (ConfigurableApplicationContext context :
        new ConfigurableApplicationContext[] {after, before}) {
      if (context != null) {
        context.close();
      }
    }
  }

  @Test
  void aRetryAfterTheUpgradeOfABodyWithALongStringReplays() throws Exception {
    List<String> notReplayed = new java.util.ArrayList<>();
    // bodies within the limit first, as a running service gets them: Jackson's recycled text
    // buffers grow to hold them, and a longer string then fits one buffer segment, which the
    // parser's length check (made as a segment fills, and by getText()) never sees when streamed
    for (int i = 0; i < 24; i++) {
      String warm = "{\"b\":1,\"a\":\"" + "x".repeat(1000) + "\"}";
      send(after, "/notify/warm-" + i, UUID.randomUUID().toString(), warm);
    }
    for (int length : new int[] {1001, 1200, 1500, 1999, 5000}) {
      String id = UUID.randomUUID().toString();
      String key = UUID.randomUUID().toString();
      String path = "/notify/" + id;
      String body = "{\"b\":1,\"a\":\"" + "x".repeat(length) + "\"}";

      HttpResponse<String> first = send(before, path, key, body);
      HttpResponse<String> retry = send(after, path, key, body);

      assertThat(first.statusCode()).as(first.body()).isEqualTo(200);
      if (retry.statusCode() != 200 || !retry.body().equals(first.body())) {
        notReplayed.add(length + " chars: " + retry.statusCode() + " " + retry.body());
      }
      assertThat(Notify.runs.get(id).get()).isEqualTo(1);
    }
    assertThat(notReplayed).isEmpty();
  }

  @Test
  void aRetryAfterTheUpgradeOfABodyWithShortStringsReplays() throws Exception {
    String id = UUID.randomUUID().toString();
    String key = UUID.randomUUID().toString();
    String path = "/notify/" + id;
    String body = "{\"to\":\"+100\",\"note\":\"" + "x".repeat(500) + "\"}";

    HttpResponse<String> first = send(before, path, key, body);
    HttpResponse<String> retry = send(after, path, key, body);

    assertThat(first.statusCode()).as(first.body()).isEqualTo(200);
    assertThat(retry.statusCode()).as(retry.body()).isEqualTo(200);
    assertThat(retry.body()).isEqualTo(first.body());
    assertThat(List.of(Notify.runs.get(id).get())).containsExactly(1);
  }

  private static HttpResponse<String> send(
      ConfigurableApplicationContext application, String path, String key, String body)
      throws Exception {
    int port = application.getEnvironment().getRequiredProperty("local.server.port", Integer.class);
    HttpRequest request =
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
            .timeout(Duration.ofSeconds(40))
            .header("Idempotency-Key", key)
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body))
            .build();
    return CLIENT.send(request, HttpResponse.BodyHandlers.ofString());
  }
}
