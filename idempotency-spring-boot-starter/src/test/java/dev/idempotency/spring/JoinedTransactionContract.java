package dev.idempotency.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.jdbc.JdbcKeyStore;
import dev.idempotency.spring.JoinedOutboxApp.Notifications;
import dev.idempotency.spring.JoinedOutboxApp.Outbox;
import dev.idempotency.spring.app.NotifyTestApplication;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DataSourceTransactionManager;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * {@code @Idempotent(joinTransaction = true)} in a running Boot application over real HTTP, on the
 * application's DataSource, which is also the store's (each subclass picks a real database): the
 * key's record, the outbox row and the outcome commit or roll back together with the caller's
 * transaction, and concurrent repeats wait on the first transaction's lock.
 */
@SpringBootTest(
    classes = {NotifyTestApplication.class, JoinedOutboxApp.Config.class},
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
    properties = {
      "idempotency.in-flight-wait=2s",
      // the held transaction and 16 repeats, each in a transaction of its own
      "spring.datasource.hikari.maximum-pool-size=24",
      "spring.datasource.hikari.minimum-idle=2"
    })
abstract class JoinedTransactionContract {

  static final int REPEATS = 16;

  @Value("${local.server.port}")
  int port;

  @Value("${idempotency.in-flight-wait}")
  Duration inFlightWait;

  @Autowired JdbcTemplate jdbc;
  @Autowired Outbox outbox;
  @Autowired Notifications notifications;
  @Autowired IdempotencyGuard guard;

  private final HttpClient http =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
  private final ExecutorService callers = Executors.newFixedThreadPool(REPEATS + 1);

  @BeforeEach
  void createOutbox() {
    jdbc.execute(JoinedOutboxApp.CREATE_TABLE);
  }

  @AfterEach
  void stopCallers() {
    callers.shutdownNow();
  }

  /** One HTTP answer and how long the caller waited for it. */
  record Answer(int status, String body, Duration took) {}

  Answer post(String path) throws Exception {
    long start = System.nanoTime();
    HttpResponse<String> response =
        http.send(
            HttpRequest.newBuilder(URI.create("http://localhost:" + port + path))
                .timeout(Duration.ofSeconds(180))
                .POST(HttpRequest.BodyPublishers.noBody())
                .build(),
            HttpResponse.BodyHandlers.ofString());
    return new Answer(
        response.statusCode(), response.body(), Duration.ofNanos(System.nanoTime() - start));
  }

  CompletableFuture<Answer> postAsync(String path) {
    return CompletableFuture.supplyAsync(
        () -> {
          try {
            return post(path);
          } catch (Exception e) {
            throw new IllegalStateException(e);
          }
        },
        callers);
  }

  int outboxRows(String key) {
    return jdbc.queryForObject(
        "select count(*) from joined_outbox where request_key = ?", Integer.class, key);
  }

  String rowId(String key) {
    return jdbc.queryForObject(
        "select id from joined_outbox where request_key = ?", String.class, key);
  }

  int records(String key) {
    return guard.find(IdempotencyKey.of("joined.enqueue", key)).isPresent() ? 1 : 0;
  }

  static void await(String what, BooleanSupplier condition) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("timed out waiting until " + what);
      }
      Thread.sleep(10);
    }
  }

  static String newKey() {
    return "k-" + UUID.randomUUID();
  }

  @Test
  void aCommitLeavesOneRecordAndOneRowAndRepeatsReplayWithoutWriting() throws Exception {
    String key = newKey();
    assertThat(outboxRows(key)).isZero();
    int before = outbox.runs();

    Answer first = post("/joined/notify?key=" + key + "&phone=555");
    assertThat(first.status()).isEqualTo(200);
    assertThat(outboxRows(key)).isEqualTo(1);
    assertThat(records(key)).isEqualTo(1);
    assertThat(first.body()).isEqualTo(rowId(key));

    for (int i = 0; i < 3; i++) {
      Answer repeat = post("/joined/notify?key=" + key + "&phone=555");
      assertThat(repeat.status()).isEqualTo(200);
      assertThat(repeat.body()).as("the committed row's id is replayed").isEqualTo(first.body());
    }
    assertThat(outbox.runs() - before).isEqualTo(1);
    assertThat(outboxRows(key)).isEqualTo(1);
    assertThat(records(key)).isEqualTo(1);
  }

  @Test
  void aFailureAfterTheMethodRollsBackTheRecordAndTheRowAndTheRetryRunsOnce() throws Exception {
    String key = newKey();
    assertThat(outboxRows(key)).isZero();
    int before = outbox.runs();

    Answer failed = post("/joined/notify?key=" + key + "&phone=555&fail=true");
    assertThat(failed.status()).isEqualTo(500);
    assertThat(failed.body()).contains("failed after the enqueue (test)");
    assertThat(outboxRows(key)).as("the outbox row was rolled back").isZero();
    assertThat(records(key)).as("the key's record was rolled back").isZero();

    Answer retry = post("/joined/notify?key=" + key + "&phone=555");
    assertThat(retry.status()).isEqualTo(200);
    Answer repeat = post("/joined/notify?key=" + key + "&phone=555");
    assertThat(repeat.body()).isEqualTo(retry.body());
    assertThat(outbox.runs() - before).as("the failed run and the retry").isEqualTo(2);
    assertThat(outboxRows(key)).isEqualTo(1);
    assertThat(records(key)).isEqualTo(1);
  }

  @Test
  void aJoiningCallWithoutATransactionFailsClearlyAndWritesNothing() throws Exception {
    String key = newKey();
    assertThat(outboxRows(key)).isZero();
    int before = outbox.runs();

    Answer refused = post("/joined/untransacted?key=" + key + "&phone=555");
    assertThat(refused.status()).isEqualTo(500);
    assertThat(refused.body())
        .startsWith("IllegalStateException")
        .contains("joined.enqueue", "Outbox.enqueue", "joinTransaction", "no transaction");
    assertThat(outbox.runs()).as("the method did not run").isEqualTo(before);
    assertThat(outboxRows(key)).isZero();
    assertThat(records(key)).isZero();
  }

  @Test
  void aTransactionTemplateIsJoinedToo() throws Exception {
    String key = newKey();
    assertThat(outboxRows(key)).isZero();
    int before = outbox.runs();

    Answer first = post("/joined/template?key=" + key + "&phone=555");
    assertThat(first.status()).isEqualTo(200);
    Answer repeat = post("/joined/template?key=" + key + "&phone=555");
    assertThat(repeat.body()).isEqualTo(first.body());
    assertThat(outbox.runs() - before).isEqualTo(1);
    assertThat(outboxRows(key)).isEqualTo(1);
    assertThat(records(key)).isEqualTo(1);
  }

  @Test
  void aMethodThatThrowsAfterItsInsertRollsBothBackAndTheRetryRuns() throws Exception {
    String key = newKey();
    assertThat(outboxRows(key)).isZero();
    int before = outbox.runs();

    Answer failed = post("/joined/notify?key=" + key + "&phone=fail-inside");
    assertThat(failed.status()).isEqualTo(500);
    assertThat(failed.body())
        .as("the method's own exception reaches the caller unchanged")
        .isEqualTo("IllegalStateException: the enqueue failed after its insert (test)");
    assertThat(outboxRows(key)).isZero();
    assertThat(records(key)).isZero();

    Answer retry = post("/joined/notify?key=" + key + "&phone=555");
    assertThat(retry.status()).isEqualTo(200);
    assertThat(outbox.runs() - before).isEqualTo(2);
    assertThat(outboxRows(key)).isEqualTo(1);
    assertThat(records(key)).isEqualTo(1);
  }

  @Test
  void aTransactionOnAnotherDataSourceFailsTheCallNamingBothAndWritesNothing() throws Exception {
    String key = newKey();
    assertThat(outboxRows(key)).isZero();
    int before = outbox.runs();
    String storeDataSource =
        String.valueOf(((JdbcKeyStore) guard.store()).dataSource().orElseThrow());

    try (HikariDataSource other = new HikariDataSource()) {
      other.setJdbcUrl("jdbc:h2:mem:other-" + UUID.randomUUID() + ";DB_CLOSE_DELAY=-1");
      other.setPoolName("other-datasource");
      TransactionTemplate onOther =
          new TransactionTemplate(new DataSourceTransactionManager(other));

      assertThatThrownBy(() -> onOther.execute(status -> outbox.enqueue(key, "555")))
          .isInstanceOf(IllegalStateException.class)
          .hasMessageContainingAll(
              "joined.enqueue",
              "joinTransaction = true",
              "does not hold the idempotency store's DataSource (" + storeDataSource + ")",
              "it holds HikariDataSource (other-datasource)",
              "nothing ran");
    }
    assertThat(outbox.runs()).as("the method did not run").isEqualTo(before);
    assertThat(outboxRows(key)).isZero();
    assertThat(records(key)).isZero();
  }

  @Test
  void repeatsWhileTheFirstTransactionIsOpenGetItsCommittedIdOr409AfterTheWait() throws Exception {
    String key = newKey();
    assertThat(outboxRows(key)).isZero();
    int runsBefore = outbox.runs();
    int enteredBefore = notifications.entered();
    CountDownLatch release = new CountDownLatch(1);
    outbox.holdUntil(release);
    try {
      CompletableFuture<Answer> first = postAsync("/joined/notify?key=" + key + "&phone=hold");
      await("the first call has claimed the key", () -> outbox.runs() == runsBefore + 1);

      List<CompletableFuture<Answer>> repeats = new ArrayList<>();
      for (int i = 0; i < REPEATS; i++) {
        repeats.add(postAsync("/joined/notify?key=" + key + "&phone=555"));
      }
      await(
          "every repeat is inside its transaction",
          () -> notifications.entered() == enteredBefore + 1 + REPEATS);
      release.countDown();

      Answer committed = first.get(180, TimeUnit.SECONDS);
      assertThat(committed.status()).isEqualTo(200);
      assertThat(committed.body()).isEqualTo(rowId(key));
      for (CompletableFuture<Answer> repeat : repeats) {
        Answer answer = repeat.get(180, TimeUnit.SECONDS);
        if (answer.status() == 200) {
          assertThat(answer.body()).as("the committed id").isEqualTo(committed.body());
        } else {
          assertThat(answer.status()).as(answer.body()).isEqualTo(409);
          assertThat(answer.took())
              .as("a 409 after the in-flight wait")
              .isGreaterThanOrEqualTo(inFlightWait);
        }
      }
    } finally {
      release.countDown();
      outbox.holdUntil(new CountDownLatch(0));
    }
    assertThat(outbox.runs() - runsBefore).as("the method ran once").isEqualTo(1);
    assertThat(outboxRows(key)).isEqualTo(1);
    assertThat(records(key)).isEqualTo(1);
  }

  @Test
  void repeatsWhileTheFirstTransactionOutlastsTheWaitGet409AndTheFirstStillCommitsOnce()
      throws Exception {
    String key = newKey();
    assertThat(outboxRows(key)).isZero();
    int runsBefore = outbox.runs();
    CountDownLatch release = new CountDownLatch(1);
    outbox.holdUntil(release);
    try {
      CompletableFuture<Answer> first = postAsync("/joined/notify?key=" + key + "&phone=hold");
      await("the first call has claimed the key", () -> outbox.runs() == runsBefore + 1);

      List<CompletableFuture<Answer>> repeats = new ArrayList<>();
      for (int i = 0; i < REPEATS; i++) {
        repeats.add(postAsync("/joined/notify?key=" + key + "&phone=555"));
      }
      for (CompletableFuture<Answer> repeat : repeats) {
        Answer answer = repeat.get(180, TimeUnit.SECONDS);
        assertThat(answer.status()).as(answer.body()).isEqualTo(409);
        assertThat(answer.took()).isGreaterThanOrEqualTo(inFlightWait);
      }
      assertThat(outboxRows(key)).as("nothing committed while the first is open").isZero();
      release.countDown();

      Answer committed = first.get(180, TimeUnit.SECONDS);
      assertThat(committed.status()).isEqualTo(200);
      assertThat(committed.body()).isEqualTo(rowId(key));
      Answer later = post("/joined/notify?key=" + key + "&phone=555");
      assertThat(later.status()).isEqualTo(200);
      assertThat(later.body()).isEqualTo(committed.body());
    } finally {
      release.countDown();
      outbox.holdUntil(new CountDownLatch(0));
    }
    assertThat(outbox.runs() - runsBefore).isEqualTo(1);
    assertThat(outboxRows(key)).isEqualTo(1);
    assertThat(records(key)).isEqualTo(1);
  }
}
