package dev.idempotency.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.spring.app.NotifyTestApplication;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.context.annotation.Import;
import org.springframework.http.HttpStatus;
import org.springframework.http.ResponseEntity;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.transaction.annotation.Transactional;
import org.springframework.transaction.support.TransactionTemplate;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;

/**
 * {@code @Idempotent(joinTransaction = true)} in a running Boot application over real HTTP, on H2
 * (the application's DataSource, which is also the store's): the key's record, the outbox row and
 * the outcome commit or roll back together with the caller's {@code @Transactional}.
 */
@SpringBootTest(
    classes = {NotifyTestApplication.class, JoinedTransactionIdempotentTest.Config.class},
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
    properties = "spring.datasource.url=jdbc:h2:mem:joined-http;DB_CLOSE_DELAY=-1")
class JoinedTransactionIdempotentTest {

  /** The enqueue: joins the transaction it is called in. */
  public static class Outbox {
    private final JdbcTemplate jdbc;
    private final AtomicInteger runs = new AtomicInteger();

    public int runs() {
      return runs.get();
    }

    public Outbox(JdbcTemplate jdbc) {
      this.jdbc = jdbc;
    }

    @Idempotent(name = "joined.enqueue", key = "#requestKey", joinTransaction = true)
    public String enqueue(String requestKey, String phone) {
      runs.incrementAndGet();
      String id = UUID.randomUUID().toString();
      jdbc.update(
          "insert into joined_outbox (id, request_key, phone) values (?, ?, ?)",
          id,
          requestKey,
          phone);
      if (phone.equals("fail-inside")) {
        throw new IllegalStateException("the enqueue failed after its insert (test)");
      }
      return id;
    }
  }

  /** The caller's transaction: enqueues, then may fail after the enqueue. */
  public static class Notifications {
    private final Outbox outbox;
    private final TransactionTemplate transactions;

    public Notifications(Outbox outbox, TransactionTemplate transactions) {
      this.outbox = outbox;
      this.transactions = transactions;
    }

    /** The caller's transaction as a {@code TransactionTemplate}. */
    public String notifyInTemplate(String key, String phone) {
      return transactions.execute(status -> outbox.enqueue(key, phone));
    }

    @Transactional
    public String notify(String key, String phone, boolean failAfter) {
      String id = outbox.enqueue(key, phone);
      if (failAfter) {
        throw new IllegalArgumentException("failed after the enqueue (test)");
      }
      return id;
    }

    /** No transaction around the joining call. */
    public String notifyWithoutTransaction(String key, String phone) {
      return outbox.enqueue(key, phone);
    }
  }

  /** {@code POST /joined/notify}: answers with the outbox row's id. */
  @RestController
  public static class JoinedController {
    private final Notifications notifications;

    public JoinedController(Notifications notifications) {
      this.notifications = notifications;
    }

    @PostMapping("/joined/notify")
    public String notify(
        @RequestParam String key,
        @RequestParam String phone,
        @RequestParam(defaultValue = "false") boolean fail) {
      return notifications.notify(key, phone, fail);
    }

    @PostMapping("/joined/template")
    public String template(@RequestParam String key, @RequestParam String phone) {
      return notifications.notifyInTemplate(key, phone);
    }

    @PostMapping("/joined/untransacted")
    public String untransacted(@RequestParam String key, @RequestParam String phone) {
      return notifications.notifyWithoutTransaction(key, phone);
    }

    @ExceptionHandler(RuntimeException.class)
    ResponseEntity<String> failed(RuntimeException e) {
      return ResponseEntity.status(HttpStatus.INTERNAL_SERVER_ERROR)
          .body(e.getClass().getSimpleName() + ": " + e.getMessage());
    }
  }

  @TestConfiguration
  @Import({Outbox.class, Notifications.class, JoinedController.class})
  static class Config {}

  @Value("${local.server.port}")
  int port;

  @Autowired JdbcTemplate jdbc;
  @Autowired Outbox outbox;
  @Autowired IdempotencyGuard guard;

  private final HttpClient http = HttpClient.newHttpClient();

  HttpResponse<String> post(String path) throws IOException, InterruptedException {
    return http.send(
        HttpRequest.newBuilder(URI.create("http://localhost:" + port + path))
            .POST(HttpRequest.BodyPublishers.noBody())
            .build(),
        HttpResponse.BodyHandlers.ofString());
  }

  int outboxRows(String key) {
    jdbc.execute(
        "create table if not exists joined_outbox"
            + " (id varchar(64) primary key, request_key varchar(200), phone varchar(32))");
    return jdbc.queryForObject(
        "select count(*) from joined_outbox where request_key = ?", Integer.class, key);
  }

  int records(String key) {
    return guard.find(IdempotencyKey.of("joined.enqueue", key)).isPresent() ? 1 : 0;
  }

  @Test
  void aCommitLeavesOneRecordAndOneRowAndRepeatsReplayWithoutWriting() throws Exception {
    String key = "k-" + UUID.randomUUID();
    assertThat(outboxRows(key)).isZero();
    int before = outbox.runs();

    HttpResponse<String> first = post("/joined/notify?key=" + key + "&phone=555");
    assertThat(first.statusCode()).isEqualTo(200);
    assertThat(outboxRows(key)).isEqualTo(1);
    assertThat(records(key)).isEqualTo(1);
    String id =
        jdbc.queryForObject(
            "select id from joined_outbox where request_key = ?", String.class, key);
    assertThat(first.body()).isEqualTo(id);

    for (int i = 0; i < 3; i++) {
      HttpResponse<String> repeat = post("/joined/notify?key=" + key + "&phone=555");
      assertThat(repeat.statusCode()).isEqualTo(200);
      assertThat(repeat.body()).as("the committed row's id is replayed").isEqualTo(id);
    }
    assertThat(outbox.runs() - before).isEqualTo(1);
    assertThat(outboxRows(key)).isEqualTo(1);
    assertThat(records(key)).isEqualTo(1);
  }

  @Test
  void aFailureAfterTheMethodRollsBackTheRecordAndTheRowAndTheRetryRunsOnce() throws Exception {
    String key = "k-" + UUID.randomUUID();
    assertThat(outboxRows(key)).isZero();
    int before = outbox.runs();

    HttpResponse<String> failed = post("/joined/notify?key=" + key + "&phone=555&fail=true");
    assertThat(failed.statusCode()).isEqualTo(500);
    assertThat(failed.body()).contains("failed after the enqueue (test)");
    assertThat(outboxRows(key)).as("the outbox row was rolled back").isZero();
    assertThat(records(key)).as("the key's record was rolled back").isZero();

    HttpResponse<String> retry = post("/joined/notify?key=" + key + "&phone=555");
    assertThat(retry.statusCode()).isEqualTo(200);
    HttpResponse<String> repeat = post("/joined/notify?key=" + key + "&phone=555");
    assertThat(repeat.body()).isEqualTo(retry.body());
    assertThat(outbox.runs() - before).as("the failed run and the retry").isEqualTo(2);
    assertThat(outboxRows(key)).isEqualTo(1);
    assertThat(records(key)).isEqualTo(1);
  }

  @Test
  void aJoiningCallWithoutATransactionFailsClearlyAndWritesNothing() throws Exception {
    String key = "k-" + UUID.randomUUID();
    assertThat(outboxRows(key)).isZero();
    int before = outbox.runs();

    HttpResponse<String> refused = post("/joined/untransacted?key=" + key + "&phone=555");
    assertThat(refused.statusCode()).isEqualTo(500);
    assertThat(refused.body())
        .startsWith("IllegalStateException")
        .contains("joined.enqueue", "Outbox.enqueue", "joinTransaction", "no transaction");
    assertThat(outbox.runs()).as("the method did not run").isEqualTo(before);
    assertThat(outboxRows(key)).isZero();
    assertThat(records(key)).isZero();
  }

  @Test
  void aTransactionTemplateIsJoinedToo() throws Exception {
    String key = "k-" + UUID.randomUUID();
    assertThat(outboxRows(key)).isZero();
    int before = outbox.runs();

    HttpResponse<String> first = post("/joined/template?key=" + key + "&phone=555");
    assertThat(first.statusCode()).isEqualTo(200);
    HttpResponse<String> repeat = post("/joined/template?key=" + key + "&phone=555");
    assertThat(repeat.body()).isEqualTo(first.body());
    assertThat(outbox.runs() - before).isEqualTo(1);
    assertThat(outboxRows(key)).isEqualTo(1);
    assertThat(records(key)).isEqualTo(1);
  }

  @Test
  void aMethodThatThrowsAfterItsInsertRollsBothBackAndTheRetryRuns() throws Exception {
    String key = "k-" + UUID.randomUUID();
    assertThat(outboxRows(key)).isZero();
    int before = outbox.runs();

    HttpResponse<String> failed = post("/joined/notify?key=" + key + "&phone=fail-inside");
    assertThat(failed.statusCode()).isEqualTo(500);
    assertThat(failed.body())
        .as("the method's own exception reaches the caller unchanged")
        .isEqualTo("IllegalStateException: the enqueue failed after its insert (test)");
    assertThat(outboxRows(key)).isZero();
    assertThat(records(key)).isZero();

    HttpResponse<String> retry = post("/joined/notify?key=" + key + "&phone=555");
    assertThat(retry.statusCode()).isEqualTo(200);
    assertThat(outbox.runs() - before).isEqualTo(2);
    assertThat(outboxRows(key)).isEqualTo(1);
    assertThat(records(key)).isEqualTo(1);
  }
}
