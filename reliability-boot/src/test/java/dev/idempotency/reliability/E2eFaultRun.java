package dev.idempotency.reliability;

import dev.idempotency.reliability.FaultHistory.Call;
import dev.idempotency.reliability.FaultHistory.Fault;
import dev.idempotency.testservers.FreePorts;
import java.io.IOException;
import java.net.ConnectException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The end-to-end fault run: a real Spring Boot application ({@code E2eApplication}, a child JVM) on
 * a restartable PostgreSQL, its blocking and async {@code @IdempotentEndpoint}s called by retrying
 * clients (the same key again after a timeout, a refused connection, a 409 or a 5xx, until a 2xx,
 * as the seed's auth service does), every send going to the {@link StandInProvider}, while a seeded
 * nemesis kills the application with SIGKILL, shuts it down with SIGTERM mid-send, restarts the
 * store and, with the Kafka listener, restarts the broker. Afterwards every key answered is asked
 * for once more (a 2xx replay with the same body), and {@link E2eChecker} reads the whole history.
 *
 * <p>Same seed, same schedule: the nemesis draws its faults and the pauses between them from the
 * seed up front and prints them (the interleaving of requests stays the machine's).
 */
final class E2eFaultRun {

  /** The nemesis's faults. */
  enum FaultType {
    /** SIGKILL of the application, then a new instance. */
    KILL,
    /** SIGTERM (graceful shutdown, close()) mid-send, then a new instance. */
    SHUTDOWN,
    /** PostgreSQL stopped for at least a lease, then started again on the same data. */
    STORE_RESTART,
    /**
     * The Kafka broker stopped for 2 to 5 s, then started again on the same port and data (only
     * with the listener): the listener's offset commits fail meanwhile and its records come again.
     */
    BROKER_RESTART
  }

  /** One step of the schedule: pause this long after the last fault's recovery, then strike. */
  record Step(long pauseMillis, FaultType fault, long downMillis) {}

  record Settings(
      Duration duration,
      long seed,
      int clients,
      Duration lease,
      Duration asyncRequestTimeout,
      int minProviderDelayMillis,
      int maxProviderDelayMillis,
      List<String> extraAppArgs,
      boolean kafka) {

    static Settings shortRun(long seed, Duration duration) {
      return new Settings(
          duration,
          seed,
          6,
          Duration.ofSeconds(2),
          Duration.ofMillis(800),
          100,
          1500,
          List.of(),
          true);
    }

    Settings withAppArgs(List<String> args) {
      return new Settings(
          duration,
          seed,
          clients,
          lease,
          asyncRequestTimeout,
          minProviderDelayMillis,
          maxProviderDelayMillis,
          List.copyOf(args),
          kafka);
    }

    /** With or without the Kafka listener and its broker. */
    Settings withKafka(boolean on) {
      return new Settings(
          duration,
          seed,
          clients,
          lease,
          asyncRequestTimeout,
          minProviderDelayMillis,
          maxProviderDelayMillis,
          extraAppArgs,
          on);
    }

    /** The schedule this seed gives: faults in seeded order, each type once per round. */
    List<Step> schedule() {
      // java.util.Random's first draws barely differ between small consecutive seeds (the store
      // restart came last in every seed's first round): mix the seed first
      Random random = new Random(new SplittableRandom(seed).nextLong());
      List<Step> steps = new ArrayList<>();
      long planned = 0;
      while (planned < duration.toMillis()) {
        List<FaultType> round = new ArrayList<>(List.of(FaultType.values()));
        if (!kafka) {
          round.remove(FaultType.BROKER_RESTART);
        }
        Collections.shuffle(round, random);
        for (FaultType fault : round) {
          long pause = 2_000 + random.nextInt(4_000);
          long down =
              switch (fault) {
                case STORE_RESTART -> lease.toMillis() + random.nextInt(2_000);
                case BROKER_RESTART -> 2_000 + random.nextInt(3_000);
                default -> 0;
              };
          steps.add(new Step(pause, fault, down));
          // an application restart takes about 10 s here, a store or broker restart about 3 s
          // plus its down time
          planned += pause + (down > 0 ? 3_000 + down : 10_000);
        }
      }
      return steps;
    }
  }

  /** The report, and how long each part took. */
  record Result(
      E2eChecker.Report report,
      int instances,
      long runMillis,
      List<String> strikes,
      List<String> problems) {}

  private static final Pattern ID = Pattern.compile("\"id\":\"(msg-\\d+)\"");

  private final Settings settings;
  private final Path dir;
  private final HttpClient http =
      HttpClient.newBuilder()
          .version(HttpClient.Version.HTTP_1_1)
          .connectTimeout(Duration.ofSeconds(2))
          .build();
  private final int appPort = FreePorts.next();
  private final AtomicInteger keyCounter = new AtomicInteger();
  private final Map<String, List<E2eChecker.Answer>> bodies = new ConcurrentHashMap<>();
  private final Map<String, String> endpointOfKey = new ConcurrentHashMap<>();
  private final List<String> problems = new CopyOnWriteArrayList<>();
  private final List<String> strikes = new ArrayList<>();
  private volatile boolean nemesisRunning = true;
  private volatile long settleDeadlineNanos = Long.MAX_VALUE;
  private AppProcess app;
  private KafkaOrders kafka;
  private int instances;

  E2eFaultRun(Settings settings, Path dir) {
    this.settings = settings;
    this.dir = dir;
  }

  Result run() throws Exception {
    List<Step> schedule = settings.schedule();
    System.out.println("e2e fault run: seed " + settings.seed() + ", schedule " + schedule);
    long started = System.currentTimeMillis();
    ExecutorService clients = Executors.newFixedThreadPool(settings.clients() + 1);
    kafka = settings.kafka() ? new KafkaOrders() : null;
    List<String> consumed = List.of();
    try (RestartablePostgres postgres = new RestartablePostgres();
        StandInProvider provider =
            new StandInProvider(
                dir,
                settings.seed(),
                settings.minProviderDelayMillis(),
                settings.maxProviderDelayMillis())) {
      List<String> appArgs = appArgs(postgres, provider);
      if (kafka != null) {
        appArgs.addAll(kafka.appArgs());
      }
      startApp(appArgs);
      long activeFrom = System.currentTimeMillis();
      List<Future<?>> running = new ArrayList<>();
      if (kafka != null) {
        running.add(clients.submit(this::publishLoop));
      }
      for (int i = 0; i < settings.clients(); i++) {
        Random random = new Random(settings.seed() * 31 + i);
        running.add(clients.submit(() -> clientLoop(random)));
      }
      try {
        runNemesis(schedule, postgres, provider, appArgs, activeFrom);
      } finally {
        nemesisRunning = false;
      }
      long activeUntil = System.currentTimeMillis();
      Files.writeString(
          dir.resolve(FaultHistory.WINDOW_FILE),
          activeFrom + "\n" + activeUntil + "\n" + settings.lease().toMillis() + "\n");
      settleDeadlineNanos = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
      for (Future<?> client : running) {
        client.get(120, TimeUnit.SECONDS);
      }
      probeEveryAnsweredKey();
      if (kafka != null) {
        consumed = kafka.awaitConsumed(Duration.ofSeconds(120));
      }
      if (!app.terminate(Duration.ofSeconds(60))) {
        problems.add("the last instance did not stop on SIGTERM within 60 s");
      }
    } finally {
      clients.shutdownNow();
      if (app != null && app.isAlive()) {
        app.kill();
      }
      if (kafka != null) {
        kafka.close();
      }
    }
    E2eChecker.Report report =
        E2eChecker.check(
            FaultHistory.read(dir),
            bodies,
            kafka == null ? List.of() : kafka.publishedKeys(),
            consumed);
    return new Result(report, instances, System.currentTimeMillis() - started, strikes, problems);
  }

  private List<String> appArgs(RestartablePostgres postgres, StandInProvider provider) {
    List<String> args = new ArrayList<>();
    args.add("--spring.datasource.url=" + postgres.url() + "&connectTimeout=2&socketTimeout=10");
    args.add("--spring.datasource.hikari.connection-timeout=1000");
    args.add("--idempotency.jdbc.initialize-schema=always");
    args.add("--idempotency.lease=" + settings.lease().toMillis() + "ms");
    args.add("--idempotency.in-flight-wait=1s");
    args.add(
        "--spring.mvc.async.request-timeout=" + settings.asyncRequestTimeout().toMillis() + "ms");
    args.add("--server.shutdown=graceful");
    args.add("--spring.lifecycle.timeout-per-shutdown-phase=20s");
    args.add("--provider.url=" + provider.url());
    args.add("--spring.main.banner-mode=off");
    args.add("--logging.level.root=WARN");
    args.addAll(settings.extraAppArgs());
    return args;
  }

  private void startApp(List<String> appArgs) throws Exception {
    instances++;
    app = AppProcess.start(dir, instances, appPort, appArgs);
    app.awaitReady(http, Duration.ofSeconds(180));
  }

  private void runNemesis(
      List<Step> schedule,
      RestartablePostgres postgres,
      StandInProvider provider,
      List<String> appArgs,
      long activeFrom)
      throws Exception {
    long end = activeFrom + settings.duration().toMillis();
    for (Step step : schedule) {
      if (System.currentTimeMillis() + step.pauseMillis() >= end) {
        break;
      }
      // the schedule's pause, not a wait for something
      TimeUnit.MILLISECONDS.sleep(step.pauseMillis());
      long at = System.currentTimeMillis();
      int sending = provider.inFlight();
      switch (step.fault()) {
        case KILL -> {
          fault("KILL", app.instance, at, at);
          app.kill();
          startApp(appArgs);
        }
        case SHUTDOWN -> {
          int instance = app.instance;
          boolean stopped = app.terminate(Duration.ofSeconds(60));
          fault("SHUTDOWN", instance, at, System.currentTimeMillis());
          if (!stopped) {
            problems.add("instance " + instance + " did not stop on SIGTERM within 60 s");
          }
          startApp(appArgs);
        }
        case STORE_RESTART -> {
          postgres.stop();
          // the store stays down this long: an outage, not only a restart
          TimeUnit.MILLISECONDS.sleep(step.downMillis());
          postgres.restart();
          fault("STORE_RESTART", 0, at, System.currentTimeMillis());
        }
        case BROKER_RESTART -> {
          kafka.restartBroker(Duration.ofMillis(step.downMillis()));
          // not an allowed cause of a second send: the store stays up, so a record that comes
          // again after a failed offset commit must be a replay
          fault("BROKER_RESTART", 0, at, System.currentTimeMillis());
        }
      }
      strikes.add(
          step.fault() + " at +" + (at - activeFrom) + " ms with " + sending + " sends in flight");
      System.out.println(
          "e2e fault run: "
              + step.fault()
              + " with "
              + sending
              + " sends in flight at +"
              + (at - activeFrom)
              + " ms, recovered at +"
              + (System.currentTimeMillis() - activeFrom)
              + " ms");
    }
    long left = end - System.currentTimeMillis();
    if (left > 0) {
      TimeUnit.MILLISECONDS.sleep(left);
    }
  }

  /**
   * The producer: a new key on the topic every 1.5 s while the nemesis runs (the listener sends one
   * at a time, 0.8 s on average at the provider, and each kill or shutdown stops it for the restart
   * and the group's rebalance).
   */
  private void publishLoop() {
    try {
      int n = 0;
      while (nemesisRunning) {
        kafka.publish(String.format("e2e-kafka-%d-%08d", settings.seed(), ++n));
        // the producer's pace
        TimeUnit.MILLISECONDS.sleep(1_500);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (Exception e) {
      problems.add("the producer failed: " + e);
    }
  }

  /** One client: a new key at a time, retried with the same key until a 2xx. */
  private void clientLoop(Random random) {
    while (nemesisRunning) {
      // at least 16 characters, as the endpoint asks of a client's key
      String key = String.format("e2e-%d-%012d", settings.seed(), keyCounter.incrementAndGet());
      String endpoint = random.nextBoolean() ? "/send" : "/send-async";
      endpointOfKey.put(key, endpoint);
      if (!untilSuccess(key, endpoint, random, false)) {
        return;
      }
      if (random.nextInt(4) == 0) {
        // the producer's own duplicate, after the first succeeded: must be a replay
        untilSuccess(key, endpoint, random, true);
      }
    }
  }

  /** Every key answered once more after the run settled: a 2xx replay with the first's body. */
  private void probeEveryAnsweredKey() {
    Random random = new Random(settings.seed());
    for (String key : new ArrayList<>(bodies.keySet())) {
      untilSuccess(key, endpointOfKey.get(key), random, true);
    }
  }

  /**
   * Sends the key's request until a 2xx or the settle deadline.
   *
   * @return whether it got a 2xx
   */
  private boolean untilSuccess(String key, String endpoint, Random random, boolean replayExpected) {
    String body = "{\"key\":\"" + key + "\",\"to\":\"+15550" + key.hashCode() % 1000 + "\"}";
    while (System.nanoTime() < settleDeadlineNanos) {
      // sometimes shorter than a slow send: the client gives up and retries with the same key
      Duration timeout = Duration.ofMillis(1_200 + random.nextInt(2_800));
      HttpRequest request =
          HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + appPort + endpoint))
              .timeout(timeout)
              .header("Content-Type", "application/json")
              .header("Idempotency-Key", key)
              .POST(HttpRequest.BodyPublishers.ofString(body, StandardCharsets.UTF_8))
              .build();
      String outcome;
      String id = null;
      try {
        HttpResponse<String> response = http.send(request, HttpResponse.BodyHandlers.ofString());
        int status = response.statusCode();
        if (status >= 200 && status < 300) {
          boolean replayed =
              response.headers().firstValue("Idempotent-Replayed").orElse("").equals("true");
          Matcher matcher = ID.matcher(response.body());
          id = matcher.find() ? matcher.group(1) : "no-id:" + response.body().replace('|', '/');
          bodies
              .computeIfAbsent(key, k -> new CopyOnWriteArrayList<>())
              .add(new E2eChecker.Answer(replayed, response.body()));
          call(key, endpoint, replayed ? "REPLAYED" : "SENT", id);
          return true;
        }
        outcome = "HTTP_" + status;
        if (status >= 400 && status < 500 && status != 409) {
          // a refusal of the request itself (400, 422): retrying the same request cannot help
          call(key, endpoint, outcome, null);
          problems.add(key + ": " + status + " " + response.body());
          return false;
        }
      } catch (HttpTimeoutException e) {
        outcome = "TIMEOUT";
      } catch (ConnectException e) {
        outcome = "CONNECTION_REFUSED";
      } catch (IOException e) {
        outcome = "CONNECTION_ERROR";
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return false;
      }
      call(key, endpoint, outcome, null);
      try {
        // the client's back-off before the retry
        TimeUnit.MILLISECONDS.sleep(100 + random.nextInt(200));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return false;
      }
    }
    return false;
  }

  private synchronized void call(String key, String endpoint, String outcome, String value) {
    append(
        "calls-clients.log",
        new Call(key, endpoint, 0, outcome, value, true, System.currentTimeMillis()).line());
  }

  private synchronized void fault(String type, int process, long millis, long untilMillis) {
    append("faults.log", new Fault(type, process, millis, untilMillis).line());
  }

  private void append(String file, String line) {
    try {
      Files.writeString(
          dir.resolve(file), line + "\n", StandardOpenOption.CREATE, StandardOpenOption.APPEND);
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }
}
