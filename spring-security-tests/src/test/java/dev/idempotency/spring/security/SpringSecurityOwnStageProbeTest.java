package dev.idempotency.spring.security;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.web.IdempotentEndpoint;
import dev.idempotency.testservers.FreePorts;
import dev.idempotency.testservers.Poll;
import dev.idempotency.testservers.RedisBinary;
import jakarta.servlet.http.HttpServletRequest;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.security.Principal;
import java.time.Duration;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.core.task.TaskDecorator;
import org.springframework.http.ResponseEntity;
import org.springframework.security.config.Customizer;
import org.springframework.security.config.annotation.web.builders.HttpSecurity;
import org.springframework.security.core.Authentication;
import org.springframework.security.core.context.SecurityContextHolder;
import org.springframework.security.core.userdetails.User;
import org.springframework.security.core.userdetails.UserDetailsService;
import org.springframework.security.provisioning.InMemoryUserDetailsManager;
import org.springframework.security.web.SecurityFilterChain;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import redis.embedded.RedisServer;

/**
 * probeG, of fixctx (aa943ff0, 6d6ac439), with the real Spring Security (HTTP Basic, users in
 * memory) on a real Redis over real HTTP: a handler's own {@code CompletableFuture} (no {@code
 * Callable} of Spring MVC's) that an application thread completes with a later {@code Callable}, on
 * time or only after the 1 s async timeout (the client got 409). The later {@code Callable} reads
 * its caller ({@code SecurityContextHolder}, its request's {@code getUserPrincipal()} and {@code
 * isUserInRole}) before it sends (the message needs it) or after (an audit line). Since fixctx the
 * starter calls the request's callable interceptors' {@code beforeConcurrentHandling} on the
 * request's thread as the handler returns, where Spring Security's {@code
 * SecurityContextCallableProcessingInterceptor} takes the caller, and runs the late {@code
 * Callable} with them. Each key must send once (SPEC 1), scoped by its principal (SPEC 13): Bob
 * with Alice's Idempotency-Key is a send of his own. A task decorator notes a task that begins on a
 * thread still holding a caller from an earlier one.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class SpringSecurityOwnStageProbeTest {

  private static final HttpClient HTTP =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

  private RedisServer redis;
  private ConfigurableApplicationContext application;
  private int port;

  @BeforeAll
  void startApplication() {
    int redisPort = FreePorts.next();
    redis =
        RedisServer.builder()
            .redisExecProvider(RedisBinary.provider())
            .port(redisPort)
            .setting("bind 127.0.0.1")
            .setting("save \"\"")
            .build();
    RedisBinary.start(redis);
    application =
        new SpringApplicationBuilder(SecuredApplication.class)
            .properties(
                "server.port=0",
                "spring.main.banner-mode=off",
                "spring.mvc.async.request-timeout=1s",
                "idempotency.store=redis",
                "spring.data.redis.host=127.0.0.1",
                "spring.data.redis.port=" + redisPort)
            .run();
    port = application.getEnvironment().getRequiredProperty("local.server.port", Integer.class);
  }

  @AfterAll
  void stopApplication() {
    if (application != null) {
      application.close();
    }
    if (redis != null) {
      redis.stop();
    }
  }

  @AfterEach
  void noThreadKeptAnEarlierCaller() {
    assertThat(OwnStages.LEFTOVERS)
        .as("tasks begun on a thread that still held a caller")
        .isEmpty();
  }

  /**
   * Alice's stage, on time or late, its later {@code Callable} reading her before or after it
   * sends: one send, read as Alice, and the retry gets the 201 replayed.
   */
  @ParameterizedTest
  @CsvSource({"on-time, before", "on-time, after", "late, before", "late, after"})
  void aLaterCallableOfTheHandlersOwnStageReadsItsCallerAndSendsOnce(String mode, String when)
      throws Exception {
    String key = newKey();
    String path = "/secured/own-stage/" + when;
    HttpResponse<byte[]> first = firstAnswer(path, mode, key, "alice");
    HttpResponse<byte[]> last = retryUntilAnswered(path, key, "alice");
    if (last.statusCode() >= 500) {
      last = retryUntilAnswered(path, key, "alice"); // the client retries a 5xx too
    }
    String seen =
        "reads "
            + OwnStages.reads.get(key)
            + ", first "
            + replayed(first)
            + ", last "
            + replayed(last);
    assertThat(first.statusCode()).as(seen).isEqualTo(mode.equals("on-time") ? 201 : 409);
    assertThat(OwnStages.sendsOf(key)).as("sends: " + seen).isEqualTo(1);
    assertThat(OwnStages.reads.get(key))
        .as(seen)
        .singleElement()
        .asString()
        .startsWith("holder=alice principal=alice sender=true");
    assertThat(last.statusCode()).as(seen).isEqualTo(201);
    assertThat(last.headers().firstValue("Idempotent-Replayed")).as(seen).hasValue("true");
    assertThat(text(last)).as(seen).contains("\"user\":\"alice\"");
  }

  /**
   * SPEC 13 with a late stage: Alice's stage completes after the timeout; Bob then posts the same
   * Idempotency-Key (on time): two sends, each read as its own caller, each retry its own answer.
   */
  @Test
  void aLateStagesKeyIsScopedByItsPrincipal() throws Exception {
    String key = newKey();
    String path = "/secured/own-stage/after";
    firstAnswer(path, "late", key, "alice");
    HttpResponse<byte[]> bob = post(path, key, "bob");
    Poll.within(Duration.ofSeconds(20))
        .until("Bob's read", () -> OwnStages.reads.get(key).size() >= 2);
    HttpResponse<byte[]> aliceAgain = retryUntilAnswered(path, key, "alice");
    HttpResponse<byte[]> bobAgain = retryUntilAnswered(path, key, "bob");
    String seen =
        "reads "
            + OwnStages.reads.get(key)
            + ", bob "
            + replayed(bob)
            + ", alice again "
            + replayed(aliceAgain)
            + ", bob again "
            + replayed(bobAgain);
    assertThat(OwnStages.sendsOf(key)).as("sends: " + seen).isEqualTo(2);
    assertThat(OwnStages.reads.get(key))
        .as(seen)
        .hasSize(2)
        .anySatisfy(read -> assertThat(read).startsWith("holder=alice principal=alice"))
        .anySatisfy(read -> assertThat(read).startsWith("holder=bob principal=bob"));
    assertThat(text(aliceAgain)).as(seen).contains("\"user\":\"alice\"");
    assertThat(text(bobAgain)).as(seen).contains("\"user\":\"bob\"");
  }

  /**
   * The first post of {@code key} by {@code user}: the stage completed at once ({@code on-time}),
   * or once the client got the timeout's answer ({@code late}); then waits until the later {@code
   * Callable} read its caller (or failed).
   */
  private HttpResponse<byte[]> firstAnswer(String path, String mode, String key, String user)
      throws Exception {
    CountDownLatch answered = new CountDownLatch(mode.equals("on-time") ? 0 : 1);
    OwnStages.firstAnswered = answered;
    HttpResponse<byte[]> first;
    try {
      first = post(path, key, user);
    } finally {
      answered.countDown(); // the application's thread completes the stage now
      OwnStages.firstAnswered = new CountDownLatch(0);
    }
    Poll.within(Duration.ofSeconds(30))
        .until("the later Callable read its caller", () -> OwnStages.reads.containsKey(key));
    return first;
  }

  /** Posts again while the answer is 409 (in progress) or 503 (not ready yet), for 20 s. */
  private HttpResponse<byte[]> retryUntilAnswered(String path, String key, String user)
      throws Exception {
    HttpResponse<byte[]> retry;
    long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
    do {
      retry = post(path, key, user);
    } while ((retry.statusCode() == 409 || retry.statusCode() == 503)
        && System.nanoTime() < deadline);
    return retry;
  }

  private HttpResponse<byte[]> post(String path, String key, String user) throws Exception {
    return HTTP.sendAsync(request(path, key, user), HttpResponse.BodyHandlers.ofByteArray())
        .get(60, TimeUnit.SECONDS);
  }

  private HttpRequest request(String path, String key, String user) {
    String credentials = user + ":" + user + "-password";
    return HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
        .timeout(Duration.ofSeconds(60))
        .header("Content-Type", "application/json")
        .header("Idempotency-Key", key)
        .header(
            "Authorization",
            "Basic "
                + Base64.getEncoder().encodeToString(credentials.getBytes(StandardCharsets.UTF_8)))
        .POST(HttpRequest.BodyPublishers.ofString("{}"))
        .build();
  }

  private static String newKey() {
    return "\"" + UUID.randomUUID() + "\"";
  }

  private static String text(HttpResponse<byte[]> response) {
    return new String(response.body(), StandardCharsets.UTF_8);
  }

  private static String replayed(HttpResponse<byte[]> response) {
    return response.statusCode()
        + " replayed="
        + response.headers().firstValue("Idempotent-Replayed").orElse(null)
        + " "
        + text(response);
  }

  /** HTTP Basic on every path, two users with role SENDER; Spring Boot's security otherwise. */
  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(OwnStages.class)
  static class SecuredApplication {

    @Bean
    SecurityFilterChain api(HttpSecurity http) throws Exception {
      return http.authorizeHttpRequests(requests -> requests.anyRequest().hasRole("SENDER"))
          .httpBasic(Customizer.withDefaults())
          .csrf(csrf -> csrf.disable())
          .build();
    }

    @Bean
    UserDetailsService users() {
      return new InMemoryUserDetailsManager(
          User.withUsername("alice").password("{noop}alice-password").roles("SENDER").build(),
          User.withUsername("bob").password("{noop}bob-password").roles("SENDER").build());
    }

    /** Notes a task that begins on a thread still holding a caller. */
    @Bean
    TaskDecorator leftoverCallerCheck() {
      return task ->
          () -> {
            Authentication left = SecurityContextHolder.getContext().getAuthentication();
            if (left != null) {
              OwnStages.LEFTOVERS.add(Thread.currentThread().getName() + " held " + left.getName());
            }
            task.run();
          };
    }
  }

  @RestController
  static class OwnStages {
    static final List<String> LEFTOVERS = new CopyOnWriteArrayList<>();
    static final Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();
    static final Map<String, List<String>> reads = new ConcurrentHashMap<>();

    /** Counted down once the first request of a test got its answer: the stage completes then. */
    static volatile CountDownLatch firstAnswered = new CountDownLatch(0);

    /**
     * Returns its own stage, which an application thread (no caller of its own) completes once the
     * first answer came with a {@code Callable} that reads its caller {@code when} it sends.
     */
    @PostMapping("/secured/own-stage/{when}")
    @IdempotentEndpoint
    public CompletableFuture<Callable<ResponseEntity<Map<String, Object>>>> ownStage(
        @PathVariable("when") String when,
        @RequestHeader("Idempotency-Key") String key,
        HttpServletRequest request) {
      CountDownLatch answered = firstAnswered;
      Callable<ResponseEntity<Map<String, Object>>> later =
          () -> {
            String user = when.equals("before") ? audit(key, request) : null;
            int n = sends.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
            if (user == null) {
              user = audit(key, request);
            }
            return ResponseEntity.status(201).body(Map.of("send", n, "user", user));
          };
      CompletableFuture<Callable<ResponseEntity<Map<String, Object>>>> stage =
          new CompletableFuture<>();
      Thread thread =
          new Thread(
              () -> {
                try {
                  answered.await(20, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                  Thread.currentThread().interrupt();
                }
                stage.complete(later);
              },
              "probeG-app");
      thread.setDaemon(true);
      thread.start();
      return stage;
    }

    /**
     * The caller as the later work reads it: its authentication, its request's principal and role;
     * fails where there is none.
     */
    private static String audit(String key, HttpServletRequest request) {
      String thread = Thread.currentThread().getName();
      try {
        Authentication authentication = SecurityContextHolder.getContext().getAuthentication();
        if (authentication == null || !authentication.isAuthenticated()) {
          throw new IllegalStateException("no authentication on thread " + thread);
        }
        Principal principal = request.getUserPrincipal();
        if (principal == null) {
          throw new IllegalStateException("no principal on thread " + thread);
        }
        read(
            key,
            "holder="
                + authentication.getName()
                + " principal="
                + principal.getName()
                + " sender="
                + request.isUserInRole("SENDER")
                + " thread="
                + thread);
        return authentication.getName();
      } catch (RuntimeException e) {
        read(key, "failed: " + e.getMessage());
        throw e;
      }
    }

    private static void read(String key, String outcome) {
      reads.computeIfAbsent(key, k -> new CopyOnWriteArrayList<>()).add(outcome);
    }

    static int sendsOf(String key) {
      AtomicInteger n = sends.get(key);
      return n == null ? 0 : n.get();
    }
  }
}
