package dev.idempotency.spring.suite;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.SwitchableKeyStore;
import dev.idempotency.spring.suite.SpringEntryPointSuiteTest.EntryPoint;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.EnumMap;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ApplicationListener;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.event.ContextClosedEvent;

/**
 * SPEC 16's shutdown hazard for the starter's HTTP-reachable entry points: the application is shut
 * down (its context closed, as on SIGTERM) while a send runs through each of them. Every send
 * finishes, its outcome is recorded, and the application started again on the same store replays
 * each one: one provider send per key, nothing left in progress, nothing lost.
 */
class SpringEntryPointShutdownTest {

  private static final HttpClient HTTP =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

  private static ConfigurableApplicationContext start(
      SwitchableKeyStore store, SuiteApplication.Provider provider) {
    return start(store, provider, new CountDownLatch(1));
  }

  /** Starts the application; {@code closing} is counted down when its shutdown begins. */
  private static ConfigurableApplicationContext start(
      SwitchableKeyStore store, SuiteApplication.Provider provider, CountDownLatch closing) {
    return new SpringApplicationBuilder(SuiteApplication.class)
        .properties(
            "server.port=0",
            "server.shutdown=graceful",
            "spring.main.banner-mode=off",
            "idempotency.in-flight-wait=50ms",
            "logging.level.dev.idempotency=WARN")
        .listeners((ApplicationListener<ContextClosedEvent>) closed -> closing.countDown())
        .initializers(
            context -> {
              context.getBeanFactory().registerSingleton("switchableKeyStore", store);
              context.getBeanFactory().registerSingleton("provider", provider);
            })
        .run();
  }

  private static HttpResponse<String> post(
      ConfigurableApplicationContext app, EntryPoint entry, String key) throws Exception {
    int port = app.getEnvironment().getRequiredProperty("local.server.port", Integer.class);
    HttpRequest request =
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + entry.path))
            .timeout(Duration.ofSeconds(90))
            .header("Content-Type", "application/json")
            .header("Idempotency-Key", key)
            .POST(HttpRequest.BodyPublishers.ofString("{\"to\":\"+15550100\"}"))
            .build();
    return HTTP.send(request, HttpResponse.BodyHandlers.ofString());
  }

  @Test
  void aShutdownMidSendFinishesEachSendAndTheRestartedApplicationReplaysIt() throws Exception {
    SwitchableKeyStore store = new SwitchableKeyStore();
    SuiteApplication.Provider provider = new SuiteApplication.Provider();
    Map<EntryPoint, String> keys = new EnumMap<>(EntryPoint.class);
    for (EntryPoint entry : EntryPoint.values()) {
      keys.put(entry, "shutdown-" + entry.name().toLowerCase() + "-" + UUID.randomUUID());
    }

    CountDownLatch closing = new CountDownLatch(1);
    ConfigurableApplicationContext first = start(store, provider, closing);
    CountDownLatch release = new CountDownLatch(1);
    CountDownLatch started = provider.hold(release, keys.size());
    Map<EntryPoint, CompletableFuture<HttpResponse<String>>> answers =
        new EnumMap<>(EntryPoint.class);
    for (EntryPoint entry : EntryPoint.values()) {
      answers.put(
          entry,
          CompletableFuture.supplyAsync(
              () -> {
                try {
                  return post(first, entry, keys.get(entry));
                } catch (Exception e) {
                  throw new IllegalStateException(e);
                }
              }));
    }
    assertThat(started.await(60, TimeUnit.SECONDS)).as("every send started").isTrue();

    CompletableFuture<Void> closed = CompletableFuture.runAsync(first::close);
    assertThat(closing.await(60, TimeUnit.SECONDS)).as("the shutdown began").isTrue();
    assertThat(closed).as("the shutdown waits for the sends").isNotDone();
    release.countDown();
    closed.get(90, TimeUnit.SECONDS);
    provider.stopHolding();
    for (EntryPoint entry : EntryPoint.values()) {
      assertThat(provider.sends(keys.get(entry))).as(entry + ": its send finished").isEqualTo(1);
    }

    try (ConfigurableApplicationContext second = start(store, provider)) {
      for (EntryPoint entry : EntryPoint.values()) {
        String key = keys.get(entry);
        HttpResponse<String> replay = post(second, entry, key);
        assertThat(replay.statusCode()).as(entry + ": " + replay.body()).isEqualTo(200);
        assertThat(replay.body()).as(entry.name()).contains("sent-" + key + "-1");
        assertThat(provider.sends(key)).as(entry + ": one provider send").isEqualTo(1);
        HttpResponse<String> answered = answers.get(entry).getNow(null);
        if (answered != null && answered.statusCode() == 200) {
          assertThat(answered.body()).as(entry + ": the first answer").isEqualTo(replay.body());
        }
      }
    }
  }
}
