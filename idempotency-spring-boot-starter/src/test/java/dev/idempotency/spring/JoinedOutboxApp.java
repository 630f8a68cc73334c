package dev.idempotency.spring;

import dev.idempotency.IdempotencyInProgressException;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
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
 * The application of {@link JoinedTransactionContract}: {@code POST /joined/notify} enqueues an
 * outbox row through an {@code @Idempotent(joinTransaction = true)} method, inside the caller's
 * transaction, and answers with the row's id.
 */
final class JoinedOutboxApp {

  private JoinedOutboxApp() {}

  /** The outbox table, on every database of the contract. */
  static final String CREATE_TABLE =
      "create table if not exists joined_outbox"
          + " (id varchar(64) primary key, request_key varchar(200), phone varchar(32))";

  /** The enqueue: joins the transaction it is called in. */
  public static class Outbox {
    private final JdbcTemplate jdbc;
    private final AtomicInteger runs = new AtomicInteger();
    private volatile CountDownLatch hold = new CountDownLatch(0);

    public Outbox(JdbcTemplate jdbc) {
      this.jdbc = jdbc;
    }

    public int runs() {
      return runs.get();
    }

    /** Makes a call with phone {@code hold} wait, after its insert, until the latch opens. */
    public void holdUntil(CountDownLatch latch) {
      this.hold = latch;
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
      if (phone.equals("hold")) {
        awaitRelease();
      }
      return id;
    }

    private void awaitRelease() {
      try {
        if (!hold.await(120, TimeUnit.SECONDS)) {
          throw new IllegalStateException("the test never released the held transaction");
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException("interrupted while held", e);
      }
    }
  }

  /** The caller's transaction: enqueues, then may fail after the enqueue. */
  public static class Notifications {
    private final Outbox outbox;
    private final TransactionTemplate transactions;
    private final AtomicInteger entered = new AtomicInteger();

    public Notifications(Outbox outbox, TransactionTemplate transactions) {
      this.outbox = outbox;
      this.transactions = transactions;
    }

    /** How many calls have entered {@link #notify}'s transaction. */
    public int entered() {
      return entered.get();
    }

    /** The caller's transaction as a {@code TransactionTemplate}. */
    public String notifyInTemplate(String key, String phone) {
      return transactions.execute(status -> outbox.enqueue(key, phone));
    }

    @Transactional
    public String notify(String key, String phone, boolean failAfter) {
      entered.incrementAndGet();
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

  /** {@code POST /joined/...}: answers with the outbox row's id. */
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

    @ExceptionHandler(IdempotencyInProgressException.class)
    ResponseEntity<String> inProgress(IdempotencyInProgressException e) {
      return ResponseEntity.status(HttpStatus.CONFLICT).body("in progress");
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
}
