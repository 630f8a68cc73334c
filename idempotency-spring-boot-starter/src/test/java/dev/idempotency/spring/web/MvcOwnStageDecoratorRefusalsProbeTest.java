package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.testservers.Poll;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.core.task.TaskDecorator;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.servlet.mvc.method.annotation.SseEmitter;
import reactor.core.publisher.Mono;

/**
 * probeN, of fixctx2 (d68ee5bc, dac12d3b, 37421fc6): the application's {@code TaskDecorator} and a
 * handler's own {@code CompletableFuture}, beyond the rows of {@link
 * MvcOwnStageDecoratorProbeTest}. Since fixctx2 a decorator that refuses (throws) on the request's
 * thread, where the starter has it wrap a task as the handler returns its stage ({@code
 * RequestThreadSetUp.here}), is logged and a later stage is decorated on the thread that completes
 * the stage. Here the decorator throws an {@code Error} there instead, refuses on the completing
 * thread too, refuses only on the request's thread, or hands the task to a thread of its own; the
 * stage completes with a {@code Mono} (on time, after the timeout, after the send), which Spring
 * MVC subscribes when it comes on time; or after the timeout with an {@code SseEmitter} that fails
 * before or after it sent (fixctx2 37421fc6 ends the follower of a late emitter). Each key must
 * send once (SPEC 1), and the retry get that send's answer (or run the handler again if nothing was
 * sent). One application on a real Redis, a 1 s async timeout, a 3 s lease (renewed while a call is
 * pending); an application thread completes the stage (after the client got the timeout's 409 for
 * the {@code late-} shapes).
 */
class MvcOwnStageDecoratorRefusalsProbeTest extends MvcProbeApplication {

  MvcOwnStageDecoratorRefusalsProbeTest() {
    super(RefusalsApplication.class, "spring.mvc.async.request-timeout=1s", "idempotency.lease=3s");
  }

  @Override
  public int runs() {
    return Stages.entered.get();
  }

  /**
   * The decorator throws an {@code Error} that is no {@code LinkageError} (an {@code
   * AssertionError}, as an {@code assert} in an application's decorator throws) on the request's
   * thread, while an application thread sends and completes the handler's stage at once with a 201.
   * The send under way is the key's: it must send once, and the retry get its 201.
   *
   * <p>Was an open finding of probeN (a second send): at cd89fe43 on Boot 3.5 and 4.0 "first 500
   * ..., last 201 replayed=null sent-2, sends 2", {@code RequestThreadSetUp.here} caught only
   * {@code RuntimeException | LinkageError}. Fixed by fixshield: any {@code Error} but a {@code
   * VirtualMachineError} is caught there too.
   */
  @Test
  void anErrorFromTheDecoratorOnTheRequestsThreadSendsOnce() throws Exception {
    HttpResponse<byte[]>[] answers = firstThenRetry("on-time-value", Mode.ERROR_ON_REQUEST);
    Poll.within(Duration.ofSeconds(5)).until("sends settled", () -> Stages.pendingSends.get() == 0);
    String key = lastKey;
    String seen = seen(answers, key);
    assertThat(Stages.sendsOf(key)).as("sends: " + seen).isEqualTo(1);
    assertThat(answers[1].statusCode()).as("the retry: " + seen).isEqualTo(201);
  }

  /**
   * The decorator refuses on the request's thread and on the thread that completes the stage after
   * the timeout with a later {@code Callable} (the send): fixctx2's note says that task then does
   * not run and its call ends as a failure before it sent, so the retry (the decorator no longer
   * refusing) runs the handler again and sends once. The key must neither stay claimed with nothing
   * sent (a lost send) nor be recorded without a send.
   *
   * <p>Was an open finding of probeN (a lost send): at cd89fe43 on Boot 3.5 and 4.0 the retries got
   * 409 for 20 s, nothing sent: the refusal on the completing thread was thrown inside {@code
   * AsyncWork.continuedDetached}, out of the advisor's {@code whenComplete}, and swallowed there.
   * Fixed by fixshield: {@code UninterruptedWork}'s continuation reports that refusal as its end,
   * before it ran (nothing sent): through the exception resolvers, the key released.
   */
  @Test
  void aDecoratorThatRefusesOnTheCompletingThreadTooNeitherLosesNorRepeatsTheSend()
      throws Exception {
    HttpResponse<byte[]>[] answers = firstThenRetry("late-callable", Mode.REFUSE_EVERYWHERE);
    String key = lastKey;
    String seen = seen(answers, key);
    assertThat(answers[0].statusCode()).as(seen).isEqualTo(409);
    assertThat(Stages.sendsOf(key)).as("sends: " + seen).isEqualTo(1);
    assertThat(answers[1].statusCode()).as("the retry: " + seen).isEqualTo(201);
  }

  /**
   * The decorator refuses only on the request's thread; the stage completes after the timeout with
   * a later {@code Callable}, decorated on the completing thread (fixctx2): it runs, sends once,
   * and the retry gets its 201 replayed. Passes on Boot 3.5 and 4.0 at cd89fe43.
   */
  @Test
  void aDecoratorThatRefusesOnlyOnTheRequestsThreadRunsALateCallableOnce() throws Exception {
    HttpResponse<byte[]>[] answers = firstThenRetry("late-callable", Mode.REFUSE_ON_REQUEST);
    String key = lastKey;
    String seen = seen(answers, key);
    assertThat(answers[0].statusCode()).as(seen).isEqualTo(409);
    assertThat(Stages.sendsOf(key)).as("sends: " + seen).isEqualTo(1);
    assertThat(answers[1].statusCode()).as("the retry: " + seen).isEqualTo(201);
    assertThat(EndpointClient.text(answers[1])).as("the retry: " + seen).isEqualTo("sent-1");
  }

  /**
   * The stage completes at once with a lazy {@code Mono} ({@code Mono.defer}, no {@code Callable})
   * whose subscription sends: Spring MVC subscribes it (a later async value); it sends once, the
   * first request gets its 201. Passes on Boot 3.5 and 4.0 at cd89fe43.
   */
  @Test
  void anOnTimeMonoOfAHandlersOwnStageSendsOnce() throws Exception {
    HttpResponse<byte[]>[] answers = firstThenRetry("on-time-mono", Mode.OFF);
    String key = lastKey;
    String seen = seen(answers, key);
    assertThat(Stages.sendsOf(key)).as("sends: " + seen).isEqualTo(1);
    assertThat(answers[0].statusCode()).as(seen).isEqualTo(201);
    assertThat(answers[1].statusCode()).as("the retry: " + seen).isEqualTo(201);
  }

  /**
   * The same lazy {@code Mono}, the stage completed after the timeout: Spring MVC no longer
   * subscribes it, so the starter must, or the send is lost; the retry must get the send's 201 (or
   * run the handler again if nothing was sent), never an answer the handler did not produce.
   *
   * <p>Was an open finding (probeN; other, medium: a replayed answer the request did not produce,
   * no second or lost send). Failed on Boot 3.5 and 4.0 at cd89fe43 (and at 76f2b4f3): "the retry:
   * first 409 ..., last 200 replayed=true , sends 1 ... expected: 201 but was: 200": the {@code
   * Mono} was subscribed and sent once, but the key was recorded as a 200 with an empty body, which
   * the retry gets replayed instead of the send's 201 {@code sent-1}; nothing logged at WARN. From
   * reading, not checked: a {@code Mono} is not among {@code AsyncResultShapes.moreAsyncWork}'s
   * types, so the late value is rendered as a final one ({@code LateResponse.render}), whose
   * reactive return value handler subscribes it as a later async value whose result the rendering
   * does not wait for. The row below, a {@code Mono} that is also a {@code Callable}, is run as a
   * later {@code Callable} and passes. Fixed by fixdecor: a single reactive value is more async
   * work ({@code AsyncResultShapes.moreAsyncWork}), which the starter subscribes as Spring MVC's
   * reactive return value handler would ({@code LaterStages}), and stores its value.
   */
  @Test
  void aLateMonoOfAHandlersOwnStageSendsOnce() throws Exception {
    HttpResponse<byte[]>[] answers = firstThenRetry("late-mono", Mode.OFF);
    String key = lastKey;
    String seen = seen(answers, key);
    assertThat(answers[0].statusCode()).as(seen).isEqualTo(409);
    assertThat(Stages.sendsOf(key)).as("sends: " + seen).isEqualTo(1);
    assertThat(answers[1].statusCode()).as("the retry: " + seen).isEqualTo(201);
  }

  /**
   * The stage completed after the timeout with {@code Mono.fromCallable}, which is itself a {@code
   * Callable} (Reactor's {@code MonoCallable}): the starter runs it as a later {@code Callable}
   * ({@code AsyncResultShapes.moreAsyncWork}); it sends once and the retry gets its 201. Passes on
   * Boot 3.5 and 4.0 at cd89fe43. Since fixdecor the starter subscribes it as a reactive value
   * instead, as Spring MVC serves it ({@code LaterStages}); still one send, the retry its 201.
   */
  @Test
  void aLateMonoThatIsACallableOfAHandlersOwnStageSendsOnce() throws Exception {
    HttpResponse<byte[]>[] answers = firstThenRetry("late-mono-callable", Mode.OFF);
    String key = lastKey;
    String seen = seen(answers, key);
    assertThat(answers[0].statusCode()).as(seen).isEqualTo(409);
    assertThat(Stages.sendsOf(key)).as("sends: " + seen).isEqualTo(1);
    assertThat(answers[1].statusCode()).as("the retry: " + seen).isEqualTo(201);
  }

  /**
   * An application thread sends, then completes the stage at once with {@code Mono.just} of the
   * send's answer (a {@code Mono} that is also a {@code Callable}, as Reactor's scalar {@code
   * Mono}s are), which Spring MVC serves as a reactive value. The send happened: the first request
   * must get its 201, or the retry must, never a second send.
   *
   * <p>Was an open finding of probeN (a second send on every retry): at cd89fe43 on Boot 3.5 and
   * 4.0 "first 500 ..., last 500 ..., sends 3", Spring MVC's reactive return value handler refusing
   * the shielded {@code Callable} the starter's {@code AsyncWorkShield} put in the {@code Mono}'s
   * place ("Unexpected return value type"). Fixed by fixshield: the shield leaves a value of a
   * reactive type as it is, as Spring MVC serves it.
   */
  @Test
  void aMonoJustAfterTheSendOfAHandlersOwnStageSendsOnce() throws Exception {
    HttpResponse<byte[]>[] answers = firstThenRetry("on-time-mono-just", Mode.OFF);
    Poll.within(Duration.ofSeconds(5)).until("sends settled", () -> Stages.pendingSends.get() == 0);
    String key = lastKey;
    String seen = seen(answers, key);
    assertThat(Stages.sendsOf(key)).as("sends: " + seen).isEqualTo(1);
    assertThat(answers[1].statusCode()).as("the retry: " + seen).isEqualTo(201);
  }

  /**
   * The stage completes at once with {@code Mono.fromCallable} (Reactor's {@code MonoCallable}, a
   * {@code Mono} that is also a {@code Callable}) whose subscription sends: Spring MVC without the
   * starter serves it as a reactive value (the reactive return value handler comes before the
   * {@code Callable} one); it sends once, the first request gets its 201.
   */
  @Test
  void anOnTimeMonoThatIsACallableOfAHandlersOwnStageSendsOnce() throws Exception {
    HttpResponse<byte[]>[] answers = firstThenRetry("on-time-mono-callable", Mode.OFF);
    String key = lastKey;
    String seen = seen(answers, key);
    assertThat(Stages.sendsOf(key)).as("sends: " + seen).isEqualTo(1);
    assertThat(answers[0].statusCode()).as(seen).isEqualTo(201);
    assertThat(answers[1].statusCode()).as("the retry: " + seen).isEqualTo(201);
  }

  /**
   * A decorator whose wrapper hands the task to a thread of its own and returns at once (it runs
   * there 500 ms later), as one that moves work onto another executor would; the stage completes
   * after the timeout with a later {@code Callable}, the send. Spring MVC's own executor runs such
   * a task whenever the wrapper's thread does. It must send once, and the retry get its 201 (or run
   * the handler again if nothing was sent), never a recorded answer with nothing sent.
   *
   * <p>Was an open finding (probeN; a lost send, SPEC 1; low: a decorator that runs the task
   * asynchronously, which {@code TaskDecorator}'s contract does not intend). Failed on Boot 3.5 and
   * 4.0 at cd89fe43 (and at 76f2b4f3): "sends: first 409 ..., last 422 replayed=null
   * {...response-not-stored..., "original-status":200}, sends 0 ... expected: 1 but was: 0"; the
   * server logs "The application's task decorator ended without running an idempotent endpoint's
   * work on the starter's thread; nothing was sent, the call ends as a failure: it returned without
   * running it". From reading: {@code DetachedWork.onATakenOverThread} takes a wrapper that
   * returned before the task ran for one that will never run it and gives the run up (so the
   * handed-off task, when it runs, does nothing), and a continuation's failure after a stage that
   * ran is recorded as answered without its body: nothing sent, and the retry never sends. Fixed by
   * fixdecor, by deciding such an end on what ran before the task, not on how the decorator
   * declined it ({@code DecoratedRun.givenUp}): the wrapper that returns is still taken for one
   * that never runs the task (the handed-off task does nothing when it runs: {@code TaskDecorator}
   * intends the task run inline), but before it only the handler and its own stage ran, whose value
   * (the later {@code Callable}) is the send still to come, so the key is released and the retry
   * sends once. After a stage that may have sent (a {@code Callable} of the work's that ran, a
   * later stage) such an end is still recorded as answered without its body: there a decorator that
   * hands its task off loses that task's send (not covered here).
   */
  @Test
  void aDecoratorThatHandsTheTaskToAnotherThreadRunsALateCallableOnce() throws Exception {
    HttpResponse<byte[]>[] answers = firstThenRetry("late-callable", Mode.HANDOFF);
    Poll.within(Duration.ofSeconds(5)).until("sends settled", () -> Stages.pendingSends.get() == 0);
    String key = lastKey;
    String seen = seen(answers, key);
    assertThat(answers[0].statusCode()).as(seen).isEqualTo(409);
    assertThat(Stages.sendsOf(key)).as("sends: " + seen).isEqualTo(1);
    assertThat(answers[1].statusCode()).as("the retry: " + seen).isEqualTo(201);
  }

  /**
   * The stage completes after the timeout with an {@code SseEmitter} that fails ({@code
   * completeWithError}, its provider refused) before it sent: followed to its end by the starter
   * (fixctx2 37421fc6 ends the follower then). Nothing was sent, so the key must be released and
   * the retry (whose stage sends at once) send once; every task the decorator wrapped runs once.
   * Passes on Boot 3.5 and 4.0 at cd89fe43.
   */
  @Test
  void aLateEmitterThatFailsBeforeItSentIsReleasedAndItsDecoratedTaskRuns() throws Exception {
    int decoratedBefore = Refusing.decorated.get();
    int ranBefore = Refusing.ran.get();
    HttpResponse<byte[]>[] answers = firstThenRetry("late-emitter-error", Mode.OFF);
    String key = lastKey;
    decoratedTasksRan(decoratedBefore, ranBefore);
    String seen = seen(answers, key) + ", " + tasks(decoratedBefore, ranBefore);
    assertThat(answers[0].statusCode()).as(seen).isEqualTo(409);
    assertThat(Stages.sendsOf(key)).as("sends: " + seen).isEqualTo(1);
    assertThat(answers[1].statusCode()).as("the retry: " + seen).isEqualTo(201);
    assertThat(Refusing.ran.get() - ranBefore)
        .as("decorated tasks that ran: " + seen)
        .isEqualTo(Refusing.decorated.get() - decoratedBefore);
  }

  /**
   * The same emitter sends (the send), then fails: a send happened, so the key is recorded as
   * answered (the retry gets {@code 422 response-not-stored}, or the send's answer), never run
   * again; every task the decorator wrapped runs once. Passes on Boot 3.5 and 4.0 at cd89fe43.
   */
  @Test
  void aLateEmitterThatFailsAfterItSentIsNeverSentAgain() throws Exception {
    int decoratedBefore = Refusing.decorated.get();
    int ranBefore = Refusing.ran.get();
    HttpResponse<byte[]>[] answers = firstThenRetry("late-emitter-sent-error", Mode.OFF);
    String key = lastKey;
    decoratedTasksRan(decoratedBefore, ranBefore);
    String seen = seen(answers, key) + ", " + tasks(decoratedBefore, ranBefore);
    assertThat(answers[0].statusCode()).as(seen).isEqualTo(409);
    assertThat(Stages.sendsOf(key)).as("sends: " + seen).isEqualTo(1);
    assertThat(answers[1].statusCode()).as("the retry: " + seen).isIn(200, 422);
    assertThat(Refusing.ran.get() - ranBefore)
        .as("decorated tasks that ran: " + seen)
        .isEqualTo(Refusing.decorated.get() - decoratedBefore);
  }

  private static void decoratedTasksRan(int decoratedBefore, int ranBefore) throws Exception {
    try {
      Poll.within(Duration.ofSeconds(10))
          .until(
              "the decorated tasks all ran",
              () -> Refusing.decorated.get() - decoratedBefore == Refusing.ran.get() - ranBefore);
    } catch (AssertionError notYet) {
      // the facts say what did not run
    }
  }

  private static String tasks(int decoratedBefore, int ranBefore) {
    return "decorated "
        + (Refusing.decorated.get() - decoratedBefore)
        + ", ran "
        + (Refusing.ran.get() - ranBefore);
  }

  private volatile String lastKey;

  /**
   * Posts to the shape with {@code mode} set for the first request and its stage's completion, then
   * retries (mode off) while 409 or 503 (20 s), once more on a 5xx.
   */
  @SuppressWarnings("unchecked")
  private HttpResponse<byte[]>[] firstThenRetry(String shape, Mode mode) throws Exception {
    String key = EndpointClient.newKey();
    lastKey = key;
    refusedBefore = Refusing.refused.get();
    String path = "/probeN/own/" + shape;
    int completedBefore = Stages.completed.get();
    CountDownLatch answered = new CountDownLatch(1);
    Stages.firstAnswered = answered;
    HttpResponse<byte[]> first;
    Refusing.mode = mode;
    try {
      try {
        first = post(path, key, "{}");
      } finally {
        answered.countDown(); // a late stage is completed now
        Stages.firstAnswered = new CountDownLatch(0);
      }
      Poll.within(Duration.ofSeconds(20))
          .until(
              "the stage of " + shape + " completed",
              () -> Stages.completed.get() > completedBefore);
    } finally {
      Refusing.mode = Mode.OFF;
    }
    HttpResponse<byte[]> last = MvcProbes.retryUntilAnswered(this, path, key);
    if (last.statusCode() >= 500) {
      last = MvcProbes.retryUntilAnswered(this, path, key); // the client retries a 5xx too
    }
    return new HttpResponse[] {first, last};
  }

  private int refusedBefore;

  private String seen(HttpResponse<byte[]>[] answers, String key) {
    return "first "
        + MvcProbes.replayed(answers[0])
        + ", last "
        + MvcProbes.replayed(answers[1])
        + ", sends "
        + Stages.sendsOf(key)
        + ", refused "
        + (Refusing.refused.get() - refusedBefore);
  }

  /** What the decorator does while a row's first request and its stage's completion run. */
  enum Mode {
    OFF,
    /** Throws an IllegalStateException on a request's thread (a Tomcat thread). */
    REFUSE_ON_REQUEST,
    /** Throws an IllegalStateException on every thread. */
    REFUSE_EVERYWHERE,
    /** Throws an AssertionError on a request's thread. */
    ERROR_ON_REQUEST,
    /** Wraps a task that hands it to a thread of its own, which runs it 500 ms later. */
    HANDOFF
  }

  /**
   * The application's decorator: wraps (counting what it wraps and what of it runs), or refuses as
   * {@link #mode} says.
   */
  static final class Refusing implements TaskDecorator {
    static volatile Mode mode = Mode.OFF;
    static final AtomicInteger refused = new AtomicInteger();
    static final AtomicInteger decorated = new AtomicInteger();
    static final AtomicInteger ran = new AtomicInteger();

    @Override
    public Runnable decorate(Runnable runnable) {
      boolean requestThread = Thread.currentThread().getName().startsWith("http-nio");
      Mode now = mode;
      if (now == Mode.REFUSE_EVERYWHERE || (now == Mode.REFUSE_ON_REQUEST && requestThread)) {
        refused.incrementAndGet();
        throw new IllegalStateException("no permit left for a task");
      }
      if (now == Mode.ERROR_ON_REQUEST && requestThread) {
        refused.incrementAndGet();
        throw new AssertionError("no permit left for a task");
      }
      if (now == Mode.HANDOFF) {
        return () -> {
          Thread later =
              new Thread(
                  () -> {
                    try {
                      Thread.sleep(500);
                    } catch (InterruptedException e) {
                      Thread.currentThread().interrupt();
                    }
                    runnable.run();
                  },
                  "probeN-handoff");
          later.setDaemon(true);
          later.start();
        };
      }
      decorated.incrementAndGet();
      return () -> {
        ran.incrementAndGet();
        runnable.run();
      };
    }
  }

  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(Stages.class)
  static class RefusalsApplication {
    @Bean
    Refusing refusingTaskDecorator() {
      return new Refusing();
    }
  }

  @RestController
  static class Stages {
    static final AtomicInteger entered = new AtomicInteger();
    static final AtomicInteger completed = new AtomicInteger();
    static final AtomicInteger pendingSends = new AtomicInteger();
    static final Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();

    /** Opened once the first request got its answer: a late stage is completed then. */
    static volatile CountDownLatch firstAnswered = new CountDownLatch(0);

    static int sendsOf(String key) {
      AtomicInteger n = sends.get(key);
      return n == null ? 0 : n.get();
    }

    static ResponseEntity<String> send(String key) {
      return ResponseEntity.status(201)
          .body("sent-" + sends.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet());
    }

    /** Returns its own stage, of {@code shape}, which an application thread completes. */
    @PostMapping("/probeN/own/{shape}")
    @IdempotentEndpoint
    public CompletableFuture<Object> own(
        @PathVariable("shape") String shape, @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      CountDownLatch answered = shape.startsWith("late-") ? firstAnswered : new CountDownLatch(0);
      CompletableFuture<Object> stage = new CompletableFuture<>();
      pendingSends.incrementAndGet();
      Thread thread =
          new Thread(
              () -> {
                try {
                  answered.await(20, TimeUnit.SECONDS);
                  complete(stage, shape, key);
                } catch (Exception e) {
                  stage.completeExceptionally(e);
                } finally {
                  pendingSends.decrementAndGet();
                  completed.incrementAndGet();
                }
              },
              "probeN-app");
      thread.setDaemon(true);
      thread.start();
      return stage;
    }

    static final Map<String, AtomicInteger> attempts = new ConcurrentHashMap<>();

    private static void complete(CompletableFuture<Object> stage, String shape, String key)
        throws Exception {
      switch (shape) {
        case "on-time-value" -> stage.complete(send(key));
        case "late-callable" -> {
          Callable<ResponseEntity<String>> later = () -> send(key);
          stage.complete(later);
        }
        case "on-time-mono", "late-mono" ->
            stage.complete(Mono.defer(() -> Mono.fromCallable(() -> send(key))));
        case "late-mono-callable", "on-time-mono-callable" ->
            stage.complete(Mono.fromCallable(() -> send(key)));
        case "on-time-mono-just" -> stage.complete(Mono.just(send(key)));
        case "late-emitter-error", "late-emitter-sent-error" -> {
          if (attempts.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet() > 1) {
            stage.complete(send(key)); // the retry: sends at once
            return;
          }
          SseEmitter emitter = new SseEmitter();
          stage.complete(emitter);
          Thread.sleep(200);
          if (shape.equals("late-emitter-sent-error")) {
            emitter.send(send(key).getBody());
          }
          emitter.completeWithError(new IllegalStateException("the provider refused"));
        }
        default -> throw new IllegalArgumentException(shape);
      }
    }
  }
}
