package dev.idempotency.spring.reactive;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.spring.reactive.ReactiveMailer.Sent;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;
import reactor.util.retry.Retry;

/**
 * Issue 39 probe (probeC): Reactor operators that the application puts around a guarded {@code
 * Mono} ({@code timeout}, {@code retry}, {@code cache}, a cancel at any moment) must not break SPEC
 * 1: the provider is called once per key, the outcome of a started send is recorded and replayed,
 * and no key is left in progress. Subscribed on Reactor's {@code parallel} threads with BlockHound
 * on; each subclass picks a store.
 */
@SpringBootTest(
    classes = ReactiveTestApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.NONE,
    properties = {"idempotency.in-flight-wait=100ms", "idempotency.lease=5s"})
abstract class MonoOperatorsProbeContract {

  private static final Duration WAIT = Duration.ofSeconds(30);

  @Autowired ReactiveMailer mailer;

  private int runsBefore;

  @BeforeAll
  static void blockHound() {
    BlockingCalls.install();
  }

  @BeforeEach
  void rememberRuns() {
    runsBefore = mailer.runs();
  }

  @AfterEach
  void nothingBlockedANonBlockingThread() {
    BlockingCalls.assertNoneFromTheSdk();
  }

  int runs() {
    return mailer.runs() - runsBefore;
  }

  static String order() {
    return UUID.randomUUID().toString();
  }

  /** The application's retry of a call that found the key in progress: bounded, 50 ms apart. */
  Mono<Sent> heldRetried(String order) {
    return Mono.defer(() -> mailer.held(order))
        .subscribeOn(Schedulers.parallel())
        .retryWhen(
            Retry.fixedDelay(400, Duration.ofMillis(50))
                .filter(error -> error instanceof IdempotencyInProgressException));
  }

  @Test
  void aTimeoutShorterThanTheSendLeavesTheOutcomeRecordedAndARetryReplaysIt() {
    String order = order();

    Throwable error =
        mailer
                    .held(order)
                    .subscribeOn(Schedulers.parallel())
                    .timeout(Duration.ofMillis(200))
                    .map(Object.class::cast)
                    .onErrorResume(Mono::just)
                    .block(WAIT)
                instanceof Throwable t
            ? t
            : null;
    assertThat(error).isInstanceOf(TimeoutException.class);
    assertThat(runs()).isEqualTo(1);

    mailer.answer(order, new Sent("accepted", order));
    Sent retried = heldRetried(order).block(WAIT);

    assertThat(retried).isEqualTo(new Sent("accepted", order));
    assertThat(runs()).isEqualTo(1);
  }

  @Test
  void aRetryOperatorAroundATimedOutSendNeverSendsAgainAndTheOutcomeIsReplayed() {
    String order = order();

    // each attempt times out: the first while its send runs, the next ones while they wait on it
    Throwable error =
        mailer
                    .held(order)
                    .subscribeOn(Schedulers.parallel())
                    .timeout(Duration.ofMillis(150))
                    .retry(5)
                    .map(Object.class::cast)
                    .onErrorResume(Mono::just)
                    .block(WAIT)
                instanceof Throwable t
            ? t
            : null;
    assertThat(error).isNotNull();
    assertThat(runs()).isEqualTo(1);

    mailer.answer(order, new Sent("accepted", order));
    Sent retried = heldRetried(order).block(WAIT);

    assertThat(retried).isEqualTo(new Sent("accepted", order));
    assertThat(runs()).isEqualTo(1);
  }

  @Test
  void aCachedMonoAndAFreshCallSendOnce() {
    String order = order();
    Mono<Sent> cached = mailer.send(order).subscribeOn(Schedulers.parallel()).cache();

    Sent first = cached.block(WAIT);
    Sent second = cached.block(WAIT);
    Sent fresh = mailer.send(order).subscribeOn(Schedulers.parallel()).block(WAIT);

    assertThat(second).isSameAs(first);
    assertThat(fresh).isEqualTo(first);
    assertThat(runs()).isEqualTo(1);
  }

  @Test
  void subscribersThatCancelAtAnyMomentNeitherLoseNorRepeatASendAndLeaveNoKeyInProgress() {
    int keys = 40;
    List<String> orders = new ArrayList<>();
    List<Disposable> subscribers = new ArrayList<>();
    for (int i = 0; i < keys; i++) {
      String order = order();
      orders.add(order);
      subscribers.add(mailer.held(order).subscribeOn(Schedulers.parallel()).subscribe());
    }
    // cancel each at a random moment: before the claim, during it, or after the send started
    List<Disposable> cancels = new ArrayList<>();
    for (Disposable subscriber : subscribers) {
      long micros = ThreadLocalRandom.current().nextLong(0, 20_000);
      cancels.add(
          Schedulers.parallel().schedule(subscriber::dispose, micros, TimeUnit.MICROSECONDS));
    }
    await(() -> subscribers.stream().allMatch(Disposable::isDisposed));
    for (String order : orders) {
      mailer.answer(order, new Sent("accepted", order));
    }

    // every key answers its retry (none left in progress), with the provider's answer
    for (String order : orders) {
      assertThat(heldRetried(order).block(WAIT)).isEqualTo(new Sent("accepted", order));
    }
    // a key whose send started was recorded (its retry replayed); one that did not start was
    // released (its retry sent): so one send per key, never two
    assertThat(runs()).as("sends for %d keys", keys).isEqualTo(keys);
  }

  static void await(BooleanSupplier condition) {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (!condition.getAsBoolean()) {
      assertThat(System.nanoTime()).as("waited 30 s").isLessThan(deadline);
      Thread.onSpinWait();
    }
  }
}
