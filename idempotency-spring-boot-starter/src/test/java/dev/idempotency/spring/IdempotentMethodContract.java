package dev.idempotency.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.IdempotencyEvent;
import dev.idempotency.IdempotencyKeyReuseException;
import dev.idempotency.spring.app.Mailer;
import dev.idempotency.spring.app.NotifyTestApplication;
import dev.idempotency.spring.app.Receipt;
import io.micrometer.core.instrument.MeterRegistry;
import java.io.IOException;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;

/**
 * {@link Idempotent} on a real Spring Boot application, on a real store (each subclass picks one):
 * every return shape, exceptions, names, fingerprints, the call's context, and self-invocation.
 */
@SpringBootTest(
    classes = NotifyTestApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.NONE)
abstract class IdempotentMethodContract {

  /** The store's kind, as the metrics tag it. */
  abstract String storeKind();

  @Autowired Mailer mailer;
  @Autowired NotifyTestApplication.RecordedEvents recorded;
  @Autowired MeterRegistry meters;
  @Autowired NotifyTestApplication.RecordedObservations observations;

  int runsBefore;

  @BeforeEach
  void rememberRuns() {
    runsBefore = mailer.runs();
  }

  int runs() {
    return mailer.runs() - runsBefore;
  }

  static String id() {
    return UUID.randomUUID().toString();
  }

  @Test
  void aRepeatReturnsTheStoredResultWithoutRunningTheMethod() {
    String order = id();

    Receipt first = mailer.send(order);
    Receipt repeat = mailer.send(order);

    assertThat(repeat).isEqualTo(first);
    assertThat(runs()).isEqualTo(1);
  }

  @Test
  void twoMethodsWithTheSameArgumentNeverShareARecord() {
    String order = id();

    Receipt one = mailer.send(order);
    Receipt other = mailer.sendAgainUnderAnotherName(order);

    assertThat(other).isNotEqualTo(one);
    assertThat(other.id()).startsWith("other-");
    assertThat(runs()).isEqualTo(2);
  }

  @Test
  void genericResultsComeBackAsTheirDeclaredType() {
    Mailer.OrderShipped event = new Mailer.OrderShipped(id(), "user_42");

    List<Receipt> first = mailer.shipped(event);
    List<Receipt> repeat = mailer.shipped(new Mailer.OrderShipped(event.orderId(), "other"));

    assertThat(repeat).isEqualTo(first).hasSize(2);
    assertThat(repeat.get(0)).isInstanceOf(Receipt.class);
    assertThat(runs()).isEqualTo(1);
  }

  @Test
  void optionalsPresentAndEmptyReplayAsTheyWere() {
    String present = id();
    String empty = id();

    Optional<Receipt> first = mailer.maybe(present, true);
    Optional<Receipt> replayed = mailer.maybe(present, false);
    Optional<Receipt> none = mailer.maybe(empty, false);
    Optional<Receipt> noneReplayed = mailer.maybe(empty, true);

    assertThat(replayed).isEqualTo(first).isPresent();
    assertThat(noneReplayed).isEmpty();
    assertThat(none).isEmpty();
    assertThat(runs()).isEqualTo(2);
  }

  @Test
  void nullVoidAndPrimitiveResults() {
    String id = id();

    assertThat(mailer.nothing(id)).isNull();
    assertThat(mailer.nothing(id)).isNull();
    mailer.fireAndForget(id);
    mailer.fireAndForget(id);
    int first = mailer.count(id);
    int again = mailer.count(id);

    assertThat(again).isEqualTo(first);
    assertThat(runs()).isEqualTo(3);
  }

  @Test
  void stagesRunThroughTheAsyncPathAndReplayTheirValue() throws Exception {
    String id = id();

    Receipt first = mailer.sendLater(id).get(30, TimeUnit.SECONDS);
    Receipt repeat = mailer.sendLater(id).get(30, TimeUnit.SECONDS);
    List<Receipt> staged = mailer.stage(id).toCompletableFuture().get(30, TimeUnit.SECONDS);
    List<Receipt> stagedAgain = mailer.stage(id).toCompletableFuture().get(30, TimeUnit.SECONDS);

    assertThat(repeat).isEqualTo(first);
    assertThat(stagedAgain).isEqualTo(staged);
    assertThat(runs()).isEqualTo(2);
  }

  @Test
  void aCheckedExceptionReachesTheCallerUnchangedAndTheKeyIsReleased() {
    String id = id();

    assertThatThrownBy(() -> mailer.failChecked(id))
        .isExactlyInstanceOf(IOException.class)
        .hasMessage("provider down for " + id);
    assertThatThrownBy(() -> mailer.failChecked(id)).isExactlyInstanceOf(IOException.class);
    assertThat(runs()).as("released: the retry ran the method again").isEqualTo(2);
  }

  @Test
  void anUncheckedExceptionReachesTheCallerUnchanged() {
    String id = id();

    assertThatThrownBy(() -> mailer.failUnchecked(id))
        .isExactlyInstanceOf(IllegalStateException.class)
        .hasMessage("bug for " + id);
    assertThatThrownBy(() -> mailer.failUnchecked(id))
        .isExactlyInstanceOf(IllegalStateException.class);
    assertThat(runs()).isEqualTo(2);
  }

  @Test
  void aFailedStageFailsWithTheMethodsOwnExceptionAndIsReleased() {
    String id = id();
    CompletableFuture<Receipt> failed = mailer.failLater(id);

    assertThatThrownBy(() -> failed.get(30, TimeUnit.SECONDS))
        .isInstanceOf(ExecutionException.class)
        .cause()
        .isExactlyInstanceOf(IOException.class);
    assertThatThrownBy(() -> mailer.failLater(id).get(30, TimeUnit.SECONDS))
        .hasCauseExactlyInstanceOf(IOException.class);
    assertThat(runs()).isEqualTo(2);
  }

  @Test
  void eventsCarryTheNameAsTheOperationNeverTheKey() {
    String order = id();
    recorded.events.clear();

    mailer.send(order);
    mailer.shipped(new Mailer.OrderShipped(order, "u"));

    assertThat(recorded.events)
        .extracting(IdempotencyEvent::operation)
        .contains("Mailer.send", "order-shipped-email")
        .noneMatch(operation -> operation.contains(order));
  }

  @Test
  void theSenderRunsWithTheCallInTheMdcAndItIsClearedAfterwards() {
    String id = id();

    String seen = mailer.mdc(id);

    String digest =
        dev.idempotency.IdempotencyKey.digest(dev.idempotency.IdempotencyKey.of("otp-sms", id));
    assertThat(seen).isEqualTo("otp-sms 1 " + digest);
    assertThat(org.slf4j.MDC.get("idempotency.key")).isNull();
    assertThat(seen).doesNotContain(id);
  }

  @Test
  void withActuatorEveryCallIsMeteredAndObservedWithoutItsKey() {
    String order = id();

    mailer.send(order);
    mailer.send(order);

    assertThat(
            meters
                .get("idempotency.calls")
                .tags("operation", "Mailer.send", "outcome", "sent")
                .counter()
                .count())
        .isPositive();
    assertThat(
            meters
                .get("idempotency.calls")
                .tags("operation", "Mailer.send", "outcome", "replayed")
                .counter()
                .count())
        .isPositive();
    assertThat(
            meters
                .get("idempotency.store")
                .tags("store", storeKind(), "operation", "claim")
                .timer()
                .count())
        .isPositive();
    assertThat(observations.names).contains("idempotency.execute");
    assertThat(meters.getMeters())
        .allSatisfy(
            meter ->
                assertThat(meter.getId().getTags())
                    .noneMatch(tag -> tag.getValue().contains(order)));
  }

  @Test
  void aRepeatWithAnotherFingerprintIsRefusedNotReplayed() {
    String id = id();

    String first = mailer.sendMessage(new Mailer.Message(id, "+15550100042", "code 1234", 7));
    String same = mailer.sendMessage(new Mailer.Message(id, "+15550100042", "code 1234", 7));

    assertThat(same).isEqualTo(first);
    assertThatThrownBy(
            () -> mailer.sendMessage(new Mailer.Message(id, "+15550100042", "code 9999", 7)))
        .isInstanceOf(IdempotencyKeyReuseException.class);
    assertThatThrownBy(
            () ->
                mailer.sendMessage(
                    new Mailer.Message(id, "+15550100042", "code 1234", 1234567890123456789L)))
        .isInstanceOf(IdempotencyKeyReuseException.class);
    assertThat(runs()).isEqualTo(1);
  }

  @Test
  void aTtlInBootsDurationFormatWorks() {
    String id = id();

    Receipt first = mailer.remind(id);
    Receipt repeat = mailer.remind(id);

    assertThat(repeat).isEqualTo(first);
    assertThat(runs()).isEqualTo(1);
  }

  @Test
  void aSendContextParameterGetsTheCallsContext() {
    String id = id();

    String seen = mailer.withContext(id, null);
    String replayed = mailer.withContext(id, null);

    String key = dev.idempotency.IdempotencyKey.of("Mailer.withContext", id);
    assertThat(seen).isEqualTo(dev.idempotency.IdempotencyKey.providerKey(key) + " 1");
    assertThat(replayed).isEqualTo(seen);
    assertThat(runs()).isEqualTo(1);
  }

  @Test
  void theBodyOfAStageMethodSeesTheCallersContext() throws Exception {
    String id = id();
    org.springframework.mock.web.MockHttpServletRequest request =
        new org.springframework.mock.web.MockHttpServletRequest();
    request.setAttribute("tenant", "acme");
    org.springframework.web.context.request.RequestContextHolder.setRequestAttributes(
        new org.springframework.web.context.request.ServletRequestAttributes(request));
    org.slf4j.MDC.put("request-id", "req-" + id);
    Mailer.CALLER.set("alice");
    try {
      String seen = mailer.contextual(id).get(30, TimeUnit.SECONDS);
      String replayed = mailer.contextual(id).get(30, TimeUnit.SECONDS);

      assertThat(seen)
          .isEqualTo(
              Thread.currentThread().getName() + "|req-" + id + "|acme|alice|Mailer.contextual");
      assertThat(replayed).isEqualTo(seen);
      assertThat(org.slf4j.MDC.get("idempotency.operation"))
          .as("the call's MDC entries are gone once the body returned")
          .isNull();
      assertThat(runs()).isEqualTo(1);
    } finally {
      org.springframework.web.context.request.RequestContextHolder.resetRequestAttributes();
      org.slf4j.MDC.remove("request-id");
      Mailer.CALLER.remove();
    }
  }

  @Test
  void aCallFromInsideTheBeanIsNotGuardedAsWithTransactional() {
    String order = id();

    Receipt first = mailer.sendFromInside(order);
    Receipt second = mailer.sendFromInside(order);

    assertThat(second).isNotEqualTo(first);
    assertThat(runs()).isEqualTo(2);
  }
}
