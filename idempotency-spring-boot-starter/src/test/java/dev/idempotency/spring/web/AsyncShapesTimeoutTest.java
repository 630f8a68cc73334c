package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.Serializable;
import java.net.URI;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.util.ClassUtils;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.context.request.async.DeferredResult;
import org.springframework.web.context.request.async.WebAsyncTask;
import org.springframework.web.servlet.mvc.method.annotation.SseEmitter;
import org.springframework.web.servlet.mvc.method.annotation.StreamingResponseBody;
import reactor.core.publisher.Mono;

/**
 * Found by the probe37d re-probe of 50ca2f0 and ade0bfe: Spring MVC {@code @IdempotentEndpoint}
 * shapes that pass the start-time checks and whose late result the guard did not follow across a
 * container async timeout (1 s) while the provider call runs (until the client has the timeout's
 * answer). The promise (SPEC 1, 13, 16): the key stays claimed while the send runs, so one provider
 * send per key whatever the client's retries.
 *
 * <p>Before the fix each of these was answered 503 at the timeout with its key released while the
 * send ran, and the retry sent again (two provider sends for one key):
 *
 * <ul>
 *   <li>{@code deferred-subclass}: declared {@code DeferredResult}, an anonymous subclass at
 *       runtime (the start check sees the declared type only; the advisor followed a runtime
 *       subclass only when the declared type was {@code Object}).
 *   <li>{@code opaque-stage}: declared {@code CompletionStage}, a stage whose {@code
 *       toCompletableFuture()} throws {@code UnsupportedOperationException}, as the JDK allows (the
 *       advisor's copy failed and the stage went on unfollowed).
 *   <li>{@code listenable}: declared {@code Object}, a Spring 6 {@code ListenableFuture} at runtime
 *       (Boot 3.5 only: Spring Framework 7 has no ListenableFuture).
 * </ul>
 *
 * <p>And any shape the advisor still does not follow fails closed: {@code unfollowed}, declared an
 * interface of the application's that a {@code CompletableFuture} subclass implements (Spring MVC
 * picks its return value handler by the runtime class; no copy fits the declared type).
 */
@ExtendWith(OutputCaptureExtension.class)
@AsyncTimeoutApplicationTest
class AsyncShapesTimeoutTest extends RunningApplication {

  static final String LISTENABLE = "org.springframework.util.concurrent.SettableListenableFuture";

  /** The provider's calls wait until the test's timed-out requests were answered. */
  @BeforeEach
  void closeTheGate() {
    ProbeController.gate = new CountDownLatch(1);
  }

  /** Whatever a test did, no provider call waits past it. */
  @AfterEach
  void openTheGate() {
    ProbeController.gate.countDown();
  }

  @ParameterizedTest
  @ValueSource(strings = {"deferred-subclass", "opaque-stage", "listenable"})
  void aTimedOutHandlerSendsOncePerKey(String kind) throws Exception {
    if (kind.equals("listenable")) {
      Assumptions.assumeTrue(
          ClassUtils.isPresent(LISTENABLE, getClass().getClassLoader()),
          "Spring Framework 6 only (no ListenableFuture in 7)");
    }
    String key = EndpointClient.newKey();
    String path = "/probe37d/" + kind;
    int sendsBefore = ProbeController.providerSends.get();

    HttpResponse<byte[]> timedOut = post(path, key, "{}");
    openTheGate();
    HttpResponse<byte[]> retry = MvcProbes.retryWhileInProgress(this, path, key);
    awaitNoPendingSend();

    assertThat(ProbeController.providerSends.get() - sendsBefore)
        .as(
            "provider sends for one key (first answer %s %s, retry %s %s)",
            timedOut.statusCode(),
            EndpointClient.text(timedOut),
            retry.statusCode(),
            EndpointClient.text(retry))
        .isEqualTo(1);
    assertThat(timedOut.statusCode()).as(EndpointClient.text(timedOut)).isEqualTo(409);
    assertThat(retry.statusCode()).as(EndpointClient.text(retry)).isEqualTo(201);
    assertThat(EndpointClient.header(retry, "Idempotent-Replayed")).isEqualTo("true");
    assertThat(EndpointClient.text(retry)).contains("\"id\":\"" + kind + "_");
  }

  /**
   * Probe41's remaining shapes (SPEC 1, 13, 16): a {@code WebAsyncTask} subclass, one whose
   * subclass decorates its callable, one with its own timeout shorter than the container's, one
   * behind a declared {@code Object}, and a {@code ResponseEntity<?>} whose body is a {@code
   * CompletableFuture} or a {@code Mono} at runtime. The provider call outlives the timeout; the
   * work's wait for it is interruptible. One provider send per key: the timed-out request gets 409,
   * the retry the stored response, and a retry after the send ended never sends again.
   */
  @ParameterizedTest
  @ValueSource(
      strings = {
        "task/subclass",
        "task/decorating",
        "task/short-timeout",
        "object-task",
        "entity/future",
        "entity/mono"
      })
  void aTimedOutShapeSendsOnceAndItsRetryIsReplayed(String shape) throws Exception {
    String key = EndpointClient.newKey();
    String path = "/probe41/" + shape;
    int sendsBefore = ProbeController.providerSends.get();

    HttpResponse<byte[]> timedOut = post(path, key, "{}");
    openTheGate();
    HttpResponse<byte[]> retry = MvcProbes.retryWhileInProgress(this, path, key);
    awaitNoPendingSend();
    HttpResponse<byte[]> late = post(path, key, "{}");
    awaitNoPendingSend();

    assertThat(ProbeController.providerSends.get() - sendsBefore)
        .as(
            "provider sends for one key (first %s %s, retry %s %s, late %s %s)",
            timedOut.statusCode(),
            EndpointClient.text(timedOut),
            retry.statusCode(),
            EndpointClient.text(retry),
            late.statusCode(),
            EndpointClient.text(late))
        .isEqualTo(1);
    assertThat(timedOut.statusCode()).as(EndpointClient.text(timedOut)).isEqualTo(409);
    for (HttpResponse<byte[]> replay : List.of(retry, late)) {
      assertThat(replay.statusCode()).as(EndpointClient.text(replay)).isEqualTo(201);
      assertThat(EndpointClient.header(replay, "Idempotent-Replayed")).isEqualTo("true");
      assertThat(EndpointClient.text(replay)).contains("\"id\":\"" + shape.replace('/', '-') + "_");
    }
  }

  /**
   * The same {@code ResponseEntity<?>} of a {@code CompletableFuture} or a {@code Mono}, answered
   * well within the timeout (50 ms): Spring MVC writes the entity from the copy of its body that
   * the advisor gives it; that response is stored and replayed, one send.
   */
  @ParameterizedTest
  @ValueSource(strings = {"quick-future", "quick-mono"})
  void anEntityOfAnAsyncBodyAnsweredInTimeIsStoredAndReplayed(String kind) throws Exception {
    String key = EndpointClient.newKey();
    String path = "/probe41/entity/" + kind;
    int sendsBefore = ProbeController.providerSends.get();

    HttpResponse<byte[]> first = post(path, key, "{}");
    HttpResponse<byte[]> repeat = post(path, key, "{}");
    awaitNoPendingSend();

    assertThat(ProbeController.providerSends.get() - sendsBefore).isEqualTo(1);
    assertThat(first.statusCode()).as(EndpointClient.text(first)).isEqualTo(201);
    assertThat(EndpointClient.text(first)).contains("\"id\":\"entity-" + kind + "_");
    assertThat(EndpointClient.header(first, "Idempotent-Replayed")).isNull();
    assertThat(repeat.statusCode()).as(EndpointClient.text(repeat)).isEqualTo(201);
    assertThat(EndpointClient.header(repeat, "Idempotent-Replayed")).isEqualTo("true");
    assertThat(repeat.body()).isEqualTo(first.body());
    assertThat(EndpointClient.header(repeat, "Location"))
        .isEqualTo(EndpointClient.header(first, "Location"));
  }

  /**
   * A result the advisor does not follow fails closed at the timeout: the client gets 409, the key
   * stays claimed while its work may send, and a retry after that send ended still gets 409, never
   * a second send (its result is not stored). One WARN per handler names it and the runtime class.
   */
  @Test
  void anUnfollowedResultKeepsItsKeyClaimedAndIsNamedOnce(CapturedOutput output) throws Exception {
    String path = "/probe37d/unfollowed";
    String key = EndpointClient.newKey();
    String otherKey = EndpointClient.newKey();
    int sendsBefore = ProbeController.providerSends.get();
    int from = output.getOut().length();

    CompletableFuture<HttpResponse<byte[]>> other =
        CompletableFuture.supplyAsync(
            () -> {
              try {
                return post(path, otherKey, "{}");
              } catch (Exception e) {
                throw new CompletionException(e);
              }
            });
    HttpResponse<byte[]> timedOut = post(path, key, "{}");
    HttpResponse<byte[]> otherTimedOut = other.get(60, TimeUnit.SECONDS);
    openTheGate();
    awaitNoPendingSend();
    HttpResponse<byte[]> afterTheSend = post(path, key, "{}");
    awaitNoPendingSend();

    assertThat(ProbeController.providerSends.get() - sendsBefore)
        .as("provider sends for two keys (retry after the send: %s)", afterTheSend.statusCode())
        .isEqualTo(2);
    assertThat(timedOut.statusCode()).as(EndpointClient.text(timedOut)).isEqualTo(409);
    assertThat(otherTimedOut.statusCode()).as(EndpointClient.text(otherTimedOut)).isEqualTo(409);
    assertThat(afterTheSend.statusCode()).as(EndpointClient.text(afterTheSend)).isEqualTo(409);
    List<String> warnings =
        output.getOut().substring(from).lines().filter(line -> line.contains(" WARN ")).toList();
    assertThat(warnings)
        .filteredOn(line -> line.contains("ProbeController.unfollowed()"))
        .as("one WARN for the handler, naming the class it returned")
        .singleElement()
        .asString()
        .contains(PendingReceipt.class.getName())
        .doesNotContain(key.replace("\"", ""));
  }

  /** Retries (bounded, 15 s) while the first request's work runs; the first other answer. */

  /** Every provider call begun has ended (bounded, 10 s). */
  static void awaitNoPendingSend() throws InterruptedException {
    long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
    while (ProbeController.pending.get() > 0 && System.nanoTime() < deadline) {
      Thread.sleep(20);
    }
  }

  /** A stage that does not interoperate: the JDK lets toCompletableFuture() throw. */
  static final class OpaqueStage<T> extends CompletableFuture<T> {
    @Override
    public CompletableFuture<T> toCompletableFuture() {
      throw new UnsupportedOperationException("not interoperable");
    }

    @Override
    public <U> CompletableFuture<U> newIncompleteFuture() {
      return new CompletableFuture<>();
    }
  }

  /** A CompletableFuture subclass that interoperates (the ordinary case). */
  static final class OwnFuture<T> extends CompletableFuture<T> {}

  /** An application's own result type, which no CompletableFuture copy fits. */
  interface Receipt {}

  /** A stage behind {@link Receipt}: Spring MVC treats it as a CompletionStage. */
  static final class PendingReceipt<T> extends CompletableFuture<T> implements Receipt {}

  /** Handlers whose provider call outlives the 1 s timeout (the test opens the gate after it). */
  @RestController
  static class ProbeController {
    private static final ExecutorService PROVIDER_THREADS =
        Executors.newCachedThreadPool(
            work -> {
              Thread thread = new Thread(work, "probe-provider");
              thread.setDaemon(true);
              return thread;
            });

    /** Open unless a test closed it ({@link #closeTheGate}, {@code AsyncShapesTimeoutHeldTest}). */
    static volatile CountDownLatch gate = new CountDownLatch(0);

    /**
     * The provider: its call ends once the test opened the gate, after the client of the request
     * that is to time out got its answer (the container's timeout fires up to a second late, more
     * on a busy machine: a call of a fixed 2 s once ended before it, and the first answer was the
     * 201 of a send on time); 2 s when the gate is open (a handler a retry ran again), 30 s at
     * most.
     */
    private static final Executor PROVIDER =
        command ->
            PROVIDER_THREADS.execute(
                () -> {
                  try {
                    CountDownLatch closed = gate;
                    if (closed.getCount() == 0) {
                      Thread.sleep(2_000);
                    } else {
                      closed.await(30, TimeUnit.SECONDS);
                    }
                  } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                  }
                  command.run();
                });

    private static final Executor QUICK_PROVIDER =
        CompletableFuture.delayedExecutor(50, TimeUnit.MILLISECONDS);
    static final AtomicInteger providerSends = new AtomicInteger();
    static final AtomicInteger pending = new AtomicInteger();
    private static final AtomicInteger runs = new AtomicInteger();

    static ResponseEntity<Map<String, Object>> sent(String kind, int run) {
      providerSends.incrementAndGet();
      pending.decrementAndGet();
      String id = kind + "_" + run;
      return ResponseEntity.created(URI.create("/probe37d/" + id)).body(Map.of("id", id));
    }

    static int begin() {
      pending.incrementAndGet();
      return runs.incrementAndGet();
    }

    @PostMapping("/probe37d/deferred-subclass")
    @IdempotentEndpoint
    public DeferredResult<ResponseEntity<Map<String, Object>>> deferredSubclass() {
      int run = begin();
      DeferredResult<ResponseEntity<Map<String, Object>>> result = new DeferredResult<>() {};
      PROVIDER.execute(() -> result.setResult(sent("deferred-subclass", run)));
      return result;
    }

    @PostMapping("/probe37d/opaque-stage")
    @IdempotentEndpoint
    public CompletionStage<ResponseEntity<Map<String, Object>>> opaqueStage() {
      int run = begin();
      OpaqueStage<ResponseEntity<Map<String, Object>>> stage = new OpaqueStage<>();
      PROVIDER.execute(() -> stage.complete(sent("opaque-stage", run)));
      return stage;
    }

    @PostMapping("/probe37d/unfollowed")
    @IdempotentEndpoint
    public Receipt unfollowed() {
      int run = begin();
      PendingReceipt<ResponseEntity<Map<String, Object>>> receipt = new PendingReceipt<>();
      PROVIDER.execute(() -> receipt.complete(sent("unfollowed", run)));
      return receipt;
    }

    @PostMapping("/probe37d/listenable")
    @IdempotentEndpoint
    public Object listenable() throws Exception {
      int run = begin();
      // built reflectively: these sources also compile against Spring Framework 7
      Class<?> type = ClassUtils.forName(LISTENABLE, getClass().getClassLoader());
      Object future = type.getConstructor().newInstance();
      PROVIDER.execute(
          () -> {
            try {
              type.getMethod("set", Object.class).invoke(future, sent("listenable", run));
            } catch (ReflectiveOperationException e) {
              throw new IllegalStateException(e);
            }
          });
      return future;
    }

    /**
     * Probe41's remaining shapes. The work waits for the provider with an interruptible {@code
     * get()}, as a client would that sends and then fails with Spring MVC's interrupt at the
     * timeout.
     */
    static ResponseEntity<Map<String, Object>> interruptibly(String kind, int run)
        throws Exception {
      return CompletableFuture.supplyAsync(() -> sent(kind, run), PROVIDER).get();
    }

    /** {@code WebAsyncTask}s: a subclass, one that decorates its callable, its own timeout. */
    @PostMapping("/probe41/task/{kind}")
    @IdempotentEndpoint
    public WebAsyncTask<ResponseEntity<Map<String, Object>>> task(@PathVariable String kind) {
      int run = begin();
      String id = "task-" + kind;
      Callable<ResponseEntity<Map<String, Object>>> work = () -> interruptibly(id, run);
      switch (kind) {
        case "subclass":
          return new WebAsyncTask<>(work) {};
        case "decorating":
          // as a task that carries a context to its thread would
          return new WebAsyncTask<>(work) {
            @Override
            public Callable<?> getCallable() {
              Callable<?> own = super.getCallable();
              return () -> own.call();
            }
          };
        case "short-timeout":
          return new WebAsyncTask<>(500L, work); // shorter than the container's 1 s
        default:
          throw new IllegalArgumentException(kind);
      }
    }

    /** A {@code WebAsyncTask} behind a declared {@code Object}. */
    @PostMapping("/probe41/object-task")
    @IdempotentEndpoint
    public Object objectTask() {
      int run = begin();
      return new WebAsyncTask<>(() -> interruptibly("object-task", run));
    }

    /**
     * A {@code ResponseEntity<?>} whose body is async at runtime: Spring MVC (6.2.9 and later)
     * hands such an entity to its reactive-type handling by the body's runtime class.
     */
    @PostMapping("/probe41/entity/{kind}")
    @IdempotentEndpoint
    public ResponseEntity<?> entity(@PathVariable String kind) {
      int run = begin();
      String id = "entity-" + kind;
      URI location = URI.create("/probe41/" + id + "_" + run);
      // the provider call is under way whatever happens to the future or the Mono: a cancel at
      // the timeout does not reach it
      CompletableFuture<Map<String, Object>> answer = new CompletableFuture<>();
      (kind.startsWith("quick-") ? QUICK_PROVIDER : PROVIDER)
          .execute(() -> answer.complete(sent(id, run).getBody()));
      switch (kind) {
        case "future", "quick-future":
          return ResponseEntity.created(location).body(answer);
        case "mono", "quick-mono":
          return ResponseEntity.created(location).body(Mono.fromFuture(answer));
        default:
          throw new IllegalArgumentException(kind);
      }
    }

    /**
     * A {@code ResponseEntity<StreamingResponseBody>} with a header of its own ({@code Location}),
     * which the shield gives Spring MVC rebuilt around the shielded body.
     */
    @PostMapping("/probe41/entity-stream")
    @IdempotentEndpoint
    public ResponseEntity<StreamingResponseBody> entityStream() {
      int run = begin();
      return ResponseEntity.created(URI.create("/probe41/entity-stream_" + run))
          .body(
              out -> {
                ResponseEntity<Map<String, Object>> answer;
                try {
                  answer = interruptibly("entity-stream", run);
                } catch (Exception e) {
                  throw new IOException(e);
                }
                out.write(String.valueOf(answer.getBody()).getBytes(StandardCharsets.UTF_8));
              });
    }

    /** A {@code StreamingResponseBody} behind a declared {@code Serializable}. */
    @PostMapping("/probe41/serializable-stream")
    @IdempotentEndpoint
    public Serializable serializableStream() {
      int run = begin();
      return (StreamingResponseBody & Serializable)
          out -> {
            ResponseEntity<Map<String, Object>> answer;
            try {
              answer = interruptibly("serializable-stream", run);
            } catch (Exception e) {
              throw new IOException(e);
            }
            out.write(String.valueOf(answer.getBody()).getBytes(StandardCharsets.UTF_8));
          };
    }

    /** Shapes expected to hold: each declared Object, the runtime type varies. */
    @PostMapping("/probe37d/object/{kind}")
    @IdempotentEndpoint
    public Object object(@PathVariable String kind) {
      int run = begin();
      switch (kind) {
        case "task":
          return new WebAsyncTask<>(
              () -> CompletableFuture.supplyAsync(() -> sent(kind, run), PROVIDER).join());
        case "own-future":
          OwnFuture<ResponseEntity<Map<String, Object>>> own = new OwnFuture<>();
          PROVIDER.execute(() -> own.complete(sent(kind, run)));
          return own;
        case "sse":
          SseEmitter emitter = new SseEmitter();
          PROVIDER.execute(
              () -> {
                ResponseEntity<Map<String, Object>> answer = sent(kind, run);
                try {
                  emitter.send(answer.getBody(), MediaType.APPLICATION_JSON);
                  emitter.complete();
                } catch (IOException | IllegalStateException timedOutAlready) {
                  // the request ended at its timeout: the send happened all the same
                }
              });
          return emitter;
        case "stream":
          StreamingResponseBody body =
              out -> {
                ResponseEntity<Map<String, Object>> answer =
                    CompletableFuture.supplyAsync(() -> sent(kind, run), PROVIDER).join();
                out.write(String.valueOf(answer.getBody()).getBytes(StandardCharsets.UTF_8));
              };
          return body;
        case "stream-part":
          // writes part of its answer, then the provider call outlives the timeout
          StreamingResponseBody part =
              out -> {
                out.write("{\"part\":".getBytes(StandardCharsets.UTF_8));
                out.flush();
                ResponseEntity<Map<String, Object>> answer =
                    CompletableFuture.supplyAsync(() -> sent(kind, run), PROVIDER).join();
                out.write(("\"" + answer.getBody() + "\"}").getBytes(StandardCharsets.UTF_8));
              };
          return part;
        default:
          throw new IllegalArgumentException(kind);
      }
    }
  }
}
