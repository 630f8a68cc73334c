package dev.idempotency.spring.reactive;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.reactive.ReactiveMailer.Sent;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
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
import reactor.test.StepVerifier;
import reactor.util.context.Context;

/**
 * {@code @Idempotent} on methods returning {@code Mono}, on a real store (each subclass picks one),
 * subscribed for real, from Reactor's non-blocking {@code parallel} threads with BlockHound on.
 */
@SpringBootTest(
    classes = ReactiveTestApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.NONE)
abstract class MonoIdempotentContract {

  private static final Duration WAIT = Duration.ofSeconds(10);

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

  private int runs() {
    return mailer.runs() - runsBefore;
  }

  private static String order() {
    return UUID.randomUUID().toString();
  }

  /** Subscribes on a {@code parallel} worker, where BlockHound fails any blocking call. */
  private static <T> Mono<T> onParallel(Mono<T> mono) {
    return mono.subscribeOn(Schedulers.parallel());
  }

  @Test
  void callingTheMethodSendsNothingUntilTheMonoIsSubscribed() {
    Mono<Sent> mono = mailer.send(order());

    assertThat(runs()).isZero();
    StepVerifier.create(onParallel(mono)).expectNextCount(1).expectComplete().verify(WAIT);
    assertThat(runs()).isEqualTo(1);
  }

  @Test
  void aMonoSubscribedTwiceSendsOnceAndTheSecondSubscriptionReplaysTheResult() {
    Mono<Sent> mono = onParallel(mailer.send(order()));

    Sent first = mono.block(WAIT);
    Sent second = mono.block(WAIT);

    assertThat(second).isEqualTo(first);
    assertThat(runs()).isEqualTo(1);
  }

  @Test
  void twoCallsWithOneKeyZippedTogetherSendOnce() {
    String order = order();

    var both = Mono.zip(onParallel(mailer.send(order)), onParallel(mailer.send(order))).block(WAIT);

    assertThat(both.getT2()).isEqualTo(both.getT1());
    assertThat(runs()).isEqualTo(1);
  }

  @Test
  void anErrorReachesTheSubscriberAndReleasesTheKeySoThatARetrySends() {
    String order = order();

    StepVerifier.create(onParallel(mailer.failOnce(order)))
        .expectErrorSatisfies(
            error ->
                assertThat(error)
                    .isExactlyInstanceOf(IllegalStateException.class)
                    .hasMessage("provider unavailable for " + order))
        .verify(WAIT);
    Sent retried = onParallel(mailer.failOnce(order)).block(WAIT);

    assertThat(retried.order()).isEqualTo(order);
    assertThat(runs()).isEqualTo(2);
  }

  @Test
  void aSubscriberThatCancelsAfterTheSendStartedLeavesTheKeyClaimedAndTheOutcomeIsRecorded() {
    String order = order();
    Disposable subscriber = onParallel(mailer.held(order)).subscribe();
    await(() -> runs() == 1);

    subscriber.dispose();
    mailer.answer(order, new Sent("accepted-by-the-provider", order));
    Sent retried = onParallel(mailer.held(order)).block(WAIT);

    assertThat(retried).isEqualTo(new Sent("accepted-by-the-provider", order));
    assertThat(runs()).isEqualTo(1);
  }

  @Test
  void theSubscribersReactorContextReachesTheMethod() {
    String order = order();

    Sent sent =
        onParallel(mailer.asTheSubscriber(order))
            .contextWrite(Context.of("user", "ann"))
            .block(WAIT);
    Sent replayed =
        onParallel(mailer.asTheSubscriber(order))
            .contextWrite(Context.of("user", "bob"))
            .block(WAIT);

    assertThat(sent.id()).isEqualTo("ann");
    assertThat(replayed).isEqualTo(sent);
    assertThat(runs()).isEqualTo(1);
  }

  @Test
  void aMonoOfVoidCompletesEmptyAndSendsOnce() {
    String order = order();

    StepVerifier.create(onParallel(mailer.sendQuietly(order))).expectComplete().verify(WAIT);
    StepVerifier.create(onParallel(mailer.sendQuietly(order))).expectComplete().verify(WAIT);

    assertThat(runs()).isEqualTo(1);
  }

  private static void await(BooleanSupplier condition) {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (!condition.getAsBoolean()) {
      assertThat(System.nanoTime()).as("waited 10 s").isLessThan(deadline);
      Thread.onSpinWait();
    }
  }
}
