package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.Outcome;
import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spring.PendingCall;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.Callable;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.springframework.mock.web.MockHttpServletRequest;
import org.springframework.mock.web.MockHttpServletResponse;
import org.springframework.web.method.HandlerMethod;

/**
 * Work the starter takes over from Spring MVC's async executor queue ({@link
 * AsyncWork#takeOverQueuedWork}, run by {@link UninterruptedWork}) on the in-memory store, without
 * a server: while every one of the starter's threads is busy it runs on the thread that takes it
 * over, as it does once those threads were shut down (the context closed), never dropped and its
 * key never released; Spring MVC's own task, if it still begins, never runs it a second time.
 */
class TakenOverWorkTest {

  private final IdempotencyGuard guard =
      IdempotencyGuard.builder().store(InMemoryKeyStore.builder().build()).build();

  @AfterEach
  void close() {
    guard.close();
  }

  @Test
  void workTakenOverWhileEveryThreadIsBusyRunsOnTheCallersThreadAndSpringsTaskNeverRunsIt()
      throws Exception {
    UninterruptedWork work = new UninterruptedWork(1);
    CountDownLatch held = new CountDownLatch(1);
    try {
      String firstKey = "taken-over:" + UUID.randomUUID();
      String secondKey = "taken-over:" + UUID.randomUUID();
      PendingCall<StoredResponse> firstCall = claim(firstKey);
      PendingCall<StoredResponse> secondCall = claim(secondKey);
      EndpointCall first = started(firstCall);
      EndpointCall second = started(secondCall);
      CountDownLatch holding = new CountDownLatch(1);
      work.shield(
          () -> {
            holding.countDown();
            held.await(30, TimeUnit.SECONDS);
            return "first";
          },
          first);
      AtomicReference<Thread> ranOn = new AtomicReference<>();
      AtomicInteger runs = new AtomicInteger();
      Callable<String> springsTask =
          work.shield(
              () -> {
                runs.incrementAndGet();
                ranOn.set(Thread.currentThread());
                return "second";
              },
              second);

      assertThat(first.asyncWork().takeOverQueuedWork(late())).isTrue();
      assertThat(holding.await(30, TimeUnit.SECONDS))
          .as("the first work holds the starter's only thread")
          .isTrue();
      assertThat(second.asyncWork().takeOverQueuedWork(late())).isTrue();

      assertThat(ranOn.get())
          .as("every thread busy: the work runs on the thread that took it over")
          .isSameAs(Thread.currentThread());
      Outcome<StoredResponse> outcome = secondCall.outcome().get(30, TimeUnit.SECONDS);
      assertThat(outcome.value()).isNotNull();
      assertThat(outcome.value().status()).as("recorded, not released").isEqualTo(201);
      assertThat(second.asyncWork().takeOverQueuedWork(late())).as("taken over once").isFalse();
      assertThatThrownBy(springsTask::call)
          .as("Spring MVC's task, begun late, does not run the work again")
          .isInstanceOf(CancellationException.class);
      assertThat(runs.get()).isOne();

      PendingCall<StoredResponse> repeat = claim(secondKey, false);
      assertThat(repeat.outcome().get(30, TimeUnit.SECONDS).replayed()).isTrue();

      assertThat(firstCall.outcome()).as("the first work still runs, its key claimed").isNotDone();
      held.countDown();
      assertThat(firstCall.outcome().get(30, TimeUnit.SECONDS).value().status()).isEqualTo(201);

      // the context closed (the starter's threads shut down): still run, on the caller's thread
      work.shutdown();
      PendingCall<StoredResponse> thirdCall = claim("taken-over:" + UUID.randomUUID());
      EndpointCall third = started(thirdCall);
      AtomicReference<Thread> thirdRanOn = new AtomicReference<>();
      work.shield(
          () -> {
            thirdRanOn.set(Thread.currentThread());
            return "third";
          },
          third);
      assertThat(third.asyncWork().takeOverQueuedWork(late())).isTrue();
      assertThat(thirdRanOn.get()).isSameAs(Thread.currentThread());
      assertThat(thirdCall.outcome().get(30, TimeUnit.SECONDS).value().status()).isEqualTo(201);
    } finally {
      held.countDown();
      work.shutdown();
    }
  }

  private PendingCall<StoredResponse> claim(String key) {
    return claim(key, true);
  }

  private PendingCall<StoredResponse> claim(String key, boolean claimed) {
    PendingCall<StoredResponse> call =
        PendingCall.claim(
            guard,
            IdempotencyRequest.of(key, Duration.ofMinutes(10)),
            StoredResponse.CODEC,
            Duration.ofSeconds(30));
    assertThat(call.claimed()).as("claimed").isEqualTo(claimed);
    return call;
  }

  private static EndpointCall started(PendingCall<StoredResponse> call) {
    EndpointCall endpoint = new EndpointCall(call, List.of(), Duration.ofSeconds(30));
    endpoint.handlerStarted();
    return endpoint;
  }

  /** The request as it went async: no application context, so a result is stored bodiless. */
  private static LateResponse late() throws NoSuchMethodException {
    MockHttpServletRequest request = new MockHttpServletRequest("POST", "/send");
    MockHttpServletResponse response = new MockHttpServletResponse();
    response.setStatus(201);
    return LateResponse.of(
        request, response, new HandlerMethod(new Sender(), Sender.class.getMethod("send")), 1024);
  }

  /** The handler whose work is taken over. */
  static final class Sender {
    public Callable<String> send() {
      return () -> "sent";
    }
  }
}
