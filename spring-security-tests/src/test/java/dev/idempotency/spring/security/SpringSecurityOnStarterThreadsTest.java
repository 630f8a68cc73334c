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
import org.junit.jupiter.params.provider.ValueSource;
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
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.context.request.async.WebAsyncTask;
import redis.embedded.RedisServer;

/**
 * The MVC work the starter runs on its own threads (a {@code Callable} shielded from Spring MVC's
 * interrupt, or taken over when queued at the async timeout) in an application secured by the real
 * Spring Security (HTTP Basic, Spring Boot's auto-configuration, users in memory), on a real Redis
 * over real HTTP: the work sends, then reads its caller as an audit line would, through {@code
 * SecurityContextHolder} and through its request's {@code getUserPrincipal()} and {@code
 * isUserInRole} (Spring Security's {@code SecurityContextHolderAwareRequestWrapper}, which answers
 * from that thread-local). Spring Security carries the context to Spring MVC's task thread with the
 * {@code CallableProcessingInterceptor} its {@code WebAsyncManagerIntegrationFilter} registers; the
 * starter runs the request's interceptors around the work on its own threads ({@code
 * TaskThreadContext}), so the work reads its caller on time, taken over (queued behind the held
 * one-thread MVC executor at a 1 s timeout) and detached (begun on time, read after the timeout),
 * sends once, and the retry gets the answer replayed (SPEC 1). The key is scoped by the principal
 * (SPEC 13): two users with one Idempotency-Key are two sends, the same user twice is one. A task
 * decorator checks that no thread that runs a task, the starter's or Spring MVC's, still holds a
 * caller from an earlier one.
 *
 * <p>Its own module (and {@code spring-security-boot4-tests} on Boot 4.0): Spring Security on the
 * starter's test class path would secure every other test application there.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class SpringSecurityOnStarterThreadsTest {

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
                "spring.task.execution.pool.core-size=1",
                "spring.task.execution.pool.max-size=1",
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
    assertThat(Audited.LEFTOVERS).as("tasks begun on a thread that still held a caller").isEmpty();
  }

  /** The control: the same work, unguarded, on Spring MVC alone, reads its caller. */
  @Test
  void springMvcAloneGivesTheWorkItsCaller() throws Exception {
    HttpResponse<byte[]> answer = post("/secured/unguarded", null, "alice");
    assertThat(answer.statusCode()).as(text(answer)).isEqualTo(201);
    assertThat(Audited.reads.get("unguarded"))
        .singleElement()
        .asString()
        .startsWith("holder=alice principal=alice sender=true");
  }

  /**
   * Work ({@code callable}, or a {@code WebAsyncTask}'s) that sends, then reads its caller, on
   * time, taken over ({@code queued}) or {@code detached}: one send, its read is its caller's on
   * the starter's thread, and the retry gets the answer replayed.
   */
  @ParameterizedTest
  @CsvSource({
    "callable, on-time",
    "callable, queued",
    "callable, detached",
    "task, queued",
    "task, detached"
  })
  void workThatReadsItsCallerAfterItSentSendsOnce(String shape, String mode) throws Exception {
    String path = shape.equals("task") ? "/secured/audited-task" : "/secured/audited";
    String key = newKey();
    HttpResponse<byte[]> first = firstAnswer(path, mode, key, "alice");
    assertThat(first.statusCode())
        .as("the first answer: %s", text(first))
        .isEqualTo(mode.equals("on-time") ? 201 : 409);
    HttpResponse<byte[]> last = retryUntilAnswered(path, key, "alice");
    if (last.statusCode() >= 500) {
      last = retryUntilAnswered(path, key, "alice"); // the client retries a 5xx too
    }
    assertThat(Audited.sendsOf(key))
        .as(
            "sends for the key (the work's reads: %s; first answer %s; last %s)",
            Audited.reads.get(key), first.statusCode() + " " + text(first), replayed(last))
        .isEqualTo(1);
    assertThat(Audited.reads.get(key))
        .singleElement()
        .asString()
        .startsWith("holder=alice principal=alice sender=true")
        .contains(
            mode.equals("queued")
                ? " thread=idempotent-endpoint-taken-over-"
                : " thread=idempotent-endpoint-");
    assertThat(last.statusCode()).as(replayed(last)).isEqualTo(201);
    assertThat(last.headers().firstValue("Idempotent-Replayed"))
        .as(replayed(last))
        .hasValue("true");
    assertThat(text(last)).as(replayed(last)).contains("\"user\":\"alice\"");
  }

  /**
   * SPEC 13: the principal is part of the key's scope. Alice's key (on time or taken over), then
   * Bob's with the same Idempotency-Key: two sends, each read as its own caller; each one's retry
   * replays its own answer; no credentials: 401, nothing sent.
   */
  @ParameterizedTest
  @ValueSource(strings = {"on-time", "queued"})
  void theKeyIsScopedByThePrincipal(String mode) throws Exception {
    String key = newKey();
    firstAnswer("/secured/audited", mode, key, "alice");
    HttpResponse<byte[]> bob = post("/secured/audited", key, "bob");
    assertThat(bob.statusCode()).as(replayed(bob)).isEqualTo(201);
    assertThat(bob.headers().firstValue("Idempotent-Replayed")).isEmpty();
    assertThat(text(bob)).contains("\"user\":\"bob\"");

    HttpResponse<byte[]> aliceAgain = retryUntilAnswered("/secured/audited", key, "alice");
    HttpResponse<byte[]> bobAgain = retryUntilAnswered("/secured/audited", key, "bob");
    HttpResponse<byte[]> anonymous = post("/secured/audited", key, null);

    assertThat(Audited.sendsOf(key))
        .as("sends for the key (the work's reads: %s)", Audited.reads.get(key))
        .isEqualTo(2);
    assertThat(Audited.reads.get(key))
        .hasSize(2)
        .anySatisfy(read -> assertThat(read).startsWith("holder=alice principal=alice sender=true"))
        .anySatisfy(read -> assertThat(read).startsWith("holder=bob principal=bob sender=true"));
    assertThat(aliceAgain.headers().firstValue("Idempotent-Replayed"))
        .as(replayed(aliceAgain))
        .hasValue("true");
    assertThat(text(aliceAgain)).as(replayed(aliceAgain)).contains("\"user\":\"alice\"");
    assertThat(bobAgain.headers().firstValue("Idempotent-Replayed"))
        .as(replayed(bobAgain))
        .hasValue("true");
    assertThat(text(bobAgain)).as(replayed(bobAgain)).contains("\"user\":\"bob\"");
    assertThat(anonymous.statusCode()).as(replayed(anonymous)).isEqualTo(401);
  }

  /**
   * The first post of {@code key} by {@code user}: on time (nothing held); {@code queued} behind an
   * unguarded request that holds Spring MVC's only executor thread, so that the starter takes it
   * over at the 1 s timeout; or {@code detached}: begun at once and held until its client got the
   * timeout's answer. Then waits until the work read its caller (or failed).
   */
  private HttpResponse<byte[]> firstAnswer(String path, String mode, String key, String user)
      throws Exception {
    boolean queued = mode.equals("queued");
    CountDownLatch answered = new CountDownLatch(mode.equals("on-time") ? 0 : 1);
    Audited.firstAnswered = answered;
    CountDownLatch release = new CountDownLatch(1);
    Audited.release = release;
    CountDownLatch blockStarted = new CountDownLatch(1);
    Audited.blockStarted = blockStarted;
    CompletableFuture<HttpResponse<byte[]>> blocking = null;
    if (queued) {
      blocking = HTTP.sendAsync(request("/secured/block", null, user), bytes());
      assertThat(blockStarted.await(30, TimeUnit.SECONDS)).as("the executor held").isTrue();
    }
    HttpResponse<byte[]> first;
    try {
      first = post(path, key, user);
    } finally {
      answered.countDown(); // the work goes on
      release.countDown();
      if (blocking != null) {
        blocking.get(60, TimeUnit.SECONDS);
      }
    }
    Poll.within(Duration.ofSeconds(30))
        .until("the work read its caller", () -> Audited.reads.containsKey(key));
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
    return HTTP.sendAsync(request(path, key, user), bytes()).get(60, TimeUnit.SECONDS);
  }

  private HttpRequest request(String path, String key, String user) {
    HttpRequest.Builder request =
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
            .timeout(Duration.ofSeconds(60))
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString("{}"));
    if (key != null) {
      request.header("Idempotency-Key", key);
    }
    if (user != null) {
      String credentials = user + ":" + user + "-password";
      request.header(
          "Authorization",
          "Basic "
              + Base64.getEncoder().encodeToString(credentials.getBytes(StandardCharsets.UTF_8)));
    }
    return request.build();
  }

  private static HttpResponse.BodyHandler<byte[]> bytes() {
    return HttpResponse.BodyHandlers.ofByteArray();
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
  @Import(Audited.class)
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

    /**
     * Notes a task that begins on a thread still holding a caller (Spring Boot applies it to Spring
     * MVC's executor, the starter to its own threads).
     */
    @Bean
    TaskDecorator leftoverCallerCheck() {
      return task ->
          () -> {
            Authentication left = SecurityContextHolder.getContext().getAuthentication();
            if (left != null) {
              Audited.LEFTOVERS.add(Thread.currentThread().getName() + " held " + left.getName());
            }
            task.run();
          };
    }
  }

  @RestController
  static class Audited {
    static final List<String> LEFTOVERS = new CopyOnWriteArrayList<>();
    static final Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();
    static final Map<String, List<String>> reads = new ConcurrentHashMap<>();

    /** Counted down once the first request of a test got its answer: the work awaits it. */
    static volatile CountDownLatch firstAnswered = new CountDownLatch(0);

    /** Counted down once the unguarded request holds the executor's thread. */
    static volatile CountDownLatch blockStarted = new CountDownLatch(1);

    /** Counted down to let the unguarded request end. */
    static volatile CountDownLatch release = new CountDownLatch(1);

    /** Sends, waits for the first answer (20 s at most), then reads its caller: an audit line. */
    @PostMapping("/secured/audited")
    @IdempotentEndpoint
    public Callable<ResponseEntity<Map<String, Object>>> audited(
        @RequestHeader("Idempotency-Key") String key, HttpServletRequest request) {
      CountDownLatch answered = firstAnswered;
      return () -> {
        int n = sends.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
        answered.await(20, TimeUnit.SECONDS);
        String user = audit(key, request);
        return ResponseEntity.status(201).body(Map.of("send", n, "user", user));
      };
    }

    /** The same work as a {@code WebAsyncTask} (Spring MVC's timeout, no executor of its own). */
    @PostMapping("/secured/audited-task")
    @IdempotentEndpoint
    public WebAsyncTask<ResponseEntity<Map<String, Object>>> auditedTask(
        @RequestHeader("Idempotency-Key") String key, HttpServletRequest request) {
      return new WebAsyncTask<>(audited(key, request));
    }

    /** The same reads, unguarded: Spring MVC alone. */
    @PostMapping("/secured/unguarded")
    public Callable<ResponseEntity<Map<String, Object>>> unguarded(HttpServletRequest request) {
      return () -> ResponseEntity.status(201).body(Map.of("user", audit("unguarded", request)));
    }

    /** Not guarded: holds the async executor's only thread until the test releases it. */
    @PostMapping("/secured/block")
    public Callable<String> block() {
      CountDownLatch started = blockStarted;
      CountDownLatch held = release;
      return () -> {
        started.countDown();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (held.getCount() > 0 && System.nanoTime() < deadline) {
          try {
            held.await(100, TimeUnit.MILLISECONDS);
          } catch (InterruptedException timeoutCancel) {
            // its own request's timeout: keep the thread busy regardless
          }
        }
        return "done";
      };
    }

    /**
     * The caller as the work reads it after it sent: its authentication, its request's principal
     * and role; fails, as an application's audit line would, where there is none.
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
