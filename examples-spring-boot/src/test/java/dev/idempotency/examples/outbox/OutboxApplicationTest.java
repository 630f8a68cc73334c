package dev.idempotency.examples.outbox;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.examples.providers.FakeSmsProvider;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The outbox example on a real PostgreSQL 17 (embedded) over real HTTP: retries of one key enqueue
 * one row and the relay sends it once; a commit that fails leaves neither the key nor the row; a
 * relay that dies between the provider call and its commit does not send again.
 */
@SpringBootTest(
    classes = OutboxApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
    // the test runs the relay itself, pass by pass
    properties = "outbox.relay.enabled=false")
class OutboxApplicationTest {

  private static EmbeddedPostgres postgres;

  @DynamicPropertySource
  static void postgres(DynamicPropertyRegistry registry) {
    registry.add("spring.datasource.url", OutboxApplicationTest::postgresUrl);
  }

  static synchronized String postgresUrl() {
    if (postgres == null) {
      try {
        postgres = EmbeddedPostgres.builder().setPGStartupWait(Duration.ofSeconds(120)).start();
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
      EmbeddedPostgres started = postgres;
      Runtime.getRuntime().addShutdownHook(new Thread(() -> closeQuietly(started)));
    }
    return postgres.getJdbcUrl("postgres", "postgres");
  }

  private static void closeQuietly(EmbeddedPostgres server) {
    try {
      server.close();
    } catch (IOException e) {
      // exiting anyway
    }
  }

  @LocalServerPort int port;
  @Autowired JdbcTemplate jdbc;
  @Autowired OutboxRelay relay;
  @Autowired FakeSmsProvider sms;
  @Autowired IdempotencyGuard guard;

  private final HttpClient http =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();

  @BeforeEach
  void emptyOutboxAndFaults() {
    jdbc.execute("CREATE TABLE IF NOT EXISTS test_faults (phone VARCHAR(32), operation TEXT)");
    jdbc.execute(
        "CREATE OR REPLACE FUNCTION test_fault() RETURNS trigger AS $$ BEGIN"
            + " IF EXISTS (SELECT 1 FROM test_faults WHERE phone = NEW.phone AND operation = TG_OP)"
            + " THEN RAISE EXCEPTION 'injected % failure (test)', TG_OP; END IF;"
            + " RETURN NEW; END $$ LANGUAGE plpgsql");
    jdbc.execute("DROP TRIGGER IF EXISTS test_fault_at_commit ON outbox");
    // checked at commit: the enqueue's transaction fails after the guarded method returned
    jdbc.execute(
        "CREATE CONSTRAINT TRIGGER test_fault_at_commit AFTER INSERT ON outbox"
            + " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION test_fault()");
    jdbc.execute("DROP TRIGGER IF EXISTS test_fault_on_update ON outbox");
    jdbc.execute(
        "CREATE TRIGGER test_fault_on_update BEFORE UPDATE ON outbox"
            + " FOR EACH ROW EXECUTE FUNCTION test_fault()");
    jdbc.update("DELETE FROM test_faults");
    while (relay.relayOnce() > 0) {
      // leaves no row of an earlier test unsent, so each test counts its own sends
    }
  }

  record Answer(int status, String body) {}

  Answer notify(String key, String phone, String text) throws Exception {
    HttpResponse<String> response =
        http.send(
            HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/notify"))
                .timeout(Duration.ofSeconds(120))
                .header("Content-Type", "application/json")
                .header("Idempotency-Key", key)
                .POST(
                    HttpRequest.BodyPublishers.ofString(
                        "{\"phone\":\"" + phone + "\",\"text\":\"" + text + "\"}"))
                .build(),
            HttpResponse.BodyHandlers.ofString());
    return new Answer(response.statusCode(), response.body());
  }

  static String newPhone() {
    return "+1555" + ThreadLocalRandom.current().nextInt(1_000_000, 10_000_000);
  }

  int rows(String phone) {
    return jdbc.queryForObject("SELECT count(*) FROM outbox WHERE phone = ?", Integer.class, phone);
  }

  String rowId(String phone) {
    return jdbc.queryForObject("SELECT id FROM outbox WHERE phone = ?", String.class, phone);
  }

  boolean keyRecorded(String key) {
    return guard.find(IdempotencyKey.of("notify", key)).isPresent();
  }

  @Test
  void retriesOfOneKeyEnqueueOneRowAndTheRelaySendsItOnce() throws Exception {
    String key = UUID.randomUUID().toString();
    String phone = newPhone();
    int requestsBefore = sms.requests();

    Answer first = notify(key, phone, "Your code is 482913");
    assertThat(first.status()).isEqualTo(200);
    assertThat(first.body()).isEqualTo("{\"notification_id\":\"" + rowId(phone) + "\"}");
    for (int i = 0; i < 3; i++) {
      Answer retry = notify(key, phone, "Your code is 482913");
      assertThat(retry.status()).isEqualTo(200);
      assertThat(retry.body()).as("the committed row's id").isEqualTo(first.body());
    }
    assertThat(rows(phone)).isEqualTo(1);
    Answer otherBody = notify(key, phone, "Your code is 111111");
    assertThat(otherBody.status()).as("same key, another request").isEqualTo(422);

    assertThat(relay.relayOnce()).isEqualTo(1);
    assertThat(relay.relayOnce()).as("nothing left to send").isZero();
    assertThat(sms.requests() - requestsBefore).as("one provider call").isEqualTo(1);
    FakeSmsProvider.Message sent = sms.accepted().get(sms.accepted().size() - 1);
    assertThat(sent.recipient()).isEqualTo(phone);
    assertThat(sent.idempotencyKey()).as("the provider key").matches("[A-Za-z0-9_-]{1,64}");
    assertThat(
            jdbc.queryForObject(
                "SELECT provider_message_id FROM outbox WHERE phone = ?", String.class, phone))
        .isEqualTo(sent.id());
  }

  @Test
  void concurrentRetriesOfOneKeyEnqueueOneRow() throws Exception {
    String key = UUID.randomUUID().toString();
    String phone = newPhone();
    List<CompletableFuture<Answer>> calls = new ArrayList<>();
    // threads of its own: the common pool has one thread on a 2-core machine
    ExecutorService callers = Executors.newFixedThreadPool(8);
    for (int i = 0; i < 8; i++) {
      calls.add(
          CompletableFuture.supplyAsync(
              () -> {
                try {
                  return notify(key, phone, "Your order shipped");
                } catch (Exception e) {
                  throw new IllegalStateException(e);
                }
              },
              callers));
    }
    callers.shutdown();
    String committed = null;
    for (CompletableFuture<Answer> call : calls) {
      Answer answer = call.get(120, TimeUnit.SECONDS);
      if (answer.status() == 200) {
        assertThat(committed == null || committed.equals(answer.body())).isTrue();
        committed = answer.body();
      } else {
        assertThat(answer.status()).as("in progress past the in-flight wait").isEqualTo(409);
      }
    }
    assertThat(rows(phone)).isEqualTo(1);
    assertThat(committed).isEqualTo("{\"notification_id\":\"" + rowId(phone) + "\"}");
  }

  @Test
  void aCommitThatFailsLeavesNeitherTheKeyNorTheRowAndTheRetryEnqueuesOnce() throws Exception {
    String key = UUID.randomUUID().toString();
    String phone = newPhone();
    jdbc.update("INSERT INTO test_faults (phone, operation) VALUES (?, 'INSERT')", phone);

    Answer failed = notify(key, phone, "Your code is 482913");
    assertThat(failed.status()).as(failed.body()).isEqualTo(500);
    assertThat(rows(phone)).as("the row was rolled back").isZero();
    assertThat(keyRecorded(key)).as("the key's record was rolled back with it").isFalse();

    jdbc.update("DELETE FROM test_faults WHERE phone = ?", phone);
    Answer retry = notify(key, phone, "Your code is 482913");
    assertThat(retry.status()).isEqualTo(200);
    assertThat(retry.body()).isEqualTo("{\"notification_id\":\"" + rowId(phone) + "\"}");
    assertThat(rows(phone)).isEqualTo(1);
    assertThat(keyRecorded(key)).isTrue();
  }

  @Test
  void aRelayThatDiesBetweenTheSendAndItsCommitDoesNotSendAgain() throws Exception {
    String key = UUID.randomUUID().toString();
    String phone = newPhone();
    assertThat(notify(key, phone, "Your parcel is on its way").status()).isEqualTo(200);
    int requestsBefore = sms.requests();
    jdbc.update("INSERT INTO test_faults (phone, operation) VALUES (?, 'UPDATE')", phone);

    Throwable crashed = null;
    try {
      relay.relayOnce();
    } catch (RuntimeException e) {
      crashed = e;
    }
    assertThat(crashed)
        .as("marking the row sent failed: the relay's transaction rolled back")
        .hasStackTraceContaining("injected UPDATE failure (test)");
    assertThat(sms.requests() - requestsBefore).as("the provider accepted it").isEqualTo(1);
    assertThat(
            jdbc.queryForObject(
                "SELECT count(*) FROM outbox WHERE phone = ? AND sent_at IS NULL",
                Integer.class,
                phone))
        .as("the row is still unsent")
        .isEqualTo(1);

    jdbc.update("DELETE FROM test_faults WHERE phone = ?", phone);
    assertThat(relay.relayOnce()).isEqualTo(1);
    assertThat(sms.requests() - requestsBefore)
        .as("the next pass replayed the recorded send")
        .isEqualTo(1);
    assertThat(
            jdbc.queryForObject(
                "SELECT provider_message_id FROM outbox WHERE phone = ?", String.class, phone))
        .isEqualTo(sms.accepted().get(sms.accepted().size() - 1).id());
  }
}
