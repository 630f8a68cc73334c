package dev.idempotency.spring.app;

import dev.idempotency.spring.web.IdempotentEndpoint;
import java.net.URI;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.context.request.async.DeferredResult;
import org.springframework.web.context.request.async.WebAsyncTask;

/** Async handlers of every kind Spring MVC supports, answering a moment later on another thread. */
@RestController
public class AsyncController {

  private static final Executor LATER =
      CompletableFuture.delayedExecutor(50, TimeUnit.MILLISECONDS);

  private final Runs runs;

  public AsyncController(Runs runs) {
    this.runs = runs;
  }

  private static ResponseEntity<Map<String, Object>> created(String kind, int run) {
    String id = kind + "_" + run;
    return ResponseEntity.created(URI.create("/async/" + id))
        .body(Map.of("id", id, "thread", Thread.currentThread().getName()));
  }

  @PostMapping("/async/callable")
  @IdempotentEndpoint
  public Callable<ResponseEntity<Map<String, Object>>> callable() {
    int run = runs.increment();
    return () -> created("callable", run);
  }

  @PostMapping("/async/deferred")
  @IdempotentEndpoint
  public DeferredResult<ResponseEntity<Map<String, Object>>> deferred() {
    int run = runs.increment();
    DeferredResult<ResponseEntity<Map<String, Object>>> result = new DeferredResult<>(30_000L);
    LATER.execute(() -> result.setResult(created("deferred", run)));
    return result;
  }

  @PostMapping("/async/future")
  @IdempotentEndpoint
  public CompletableFuture<ResponseEntity<Map<String, Object>>> future() {
    int run = runs.increment();
    return CompletableFuture.supplyAsync(() -> created("future", run), LATER);
  }

  @PostMapping("/async/task")
  @IdempotentEndpoint
  public WebAsyncTask<ResponseEntity<Map<String, Object>>> task() {
    int run = runs.increment();
    return new WebAsyncTask<>(30_000L, () -> created("task", run));
  }

  /**
   * The provider of the slow handlers answers once the test calls {@link #answerProviderCalls},
   * which it does once the client got its timed-out answer: Tomcat looks for expired async requests
   * once a second, so a container timeout of 1 s fires between 1 and 2 s, and a provider with a
   * fixed delay had to outlast that even on a busy machine (3 s a call). Unanswered after 30 s (a
   * test that failed before it answered), a call answers all the same.
   */
  private volatile CompletableFuture<Void> providerGate = new CompletableFuture<>();

  private final AtomicInteger providerSends = new AtomicInteger();

  /** Lets the slow handlers' provider calls made so far answer; later ones wait for the next. */
  public void answerProviderCalls() {
    CompletableFuture<Void> gate = providerGate;
    providerGate = new CompletableFuture<>();
    gate.complete(null);
  }

  /** The answer of one provider call: when the test lets it, at the latest 30 s from now. */
  private CompletableFuture<Void> providerAnswer() {
    CompletableFuture<Void> answer = new CompletableFuture<>();
    providerGate.thenRun(() -> answer.complete(null));
    return answer.completeOnTimeout(null, 30, TimeUnit.SECONDS);
  }

  /** How often the slow handlers' provider sent. */
  public int providerSends() {
    return providerSends.get();
  }

  private ResponseEntity<Map<String, Object>> sent(String kind, int run) {
    providerSends.incrementAndGet();
    return created(kind, run);
  }

  /** Async handlers whose provider call outlives a container timeout of 1 s. */
  @PostMapping("/async/slow/future")
  @IdempotentEndpoint
  public CompletableFuture<ResponseEntity<Map<String, Object>>> slowFuture() {
    int run = runs.increment();
    return providerAnswer().thenApplyAsync(answered -> sent("slow-future", run));
  }

  @PostMapping("/async/slow/callable")
  @IdempotentEndpoint
  public Callable<ResponseEntity<Map<String, Object>>> slowCallable() {
    int run = runs.increment();
    CompletableFuture<Void> answer = providerAnswer();
    return () -> answer.thenApplyAsync(answered -> sent("slow-callable", run)).join();
  }

  /**
   * The provider call as a real client makes it: the provider has the request at once (counted),
   * and the caller blocks, interruptibly, for its answer (the one the handler asked for).
   */
  private ResponseEntity<Map<String, Object>> interruptibleSend(
      String kind, int run, CompletableFuture<Void> answer) {
    providerSends.incrementAndGet();
    try {
      answer.get();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("the provider call was interrupted", e);
    } catch (java.util.concurrent.ExecutionException e) {
      throw new IllegalStateException(e);
    }
    return created(kind, run);
  }

  @PostMapping("/async/slow/interruptible-callable")
  @IdempotentEndpoint
  public Callable<ResponseEntity<Map<String, Object>>> slowInterruptibleCallable() {
    int run = runs.increment();
    CompletableFuture<Void> answer = providerAnswer();
    return () -> interruptibleSend("slow-interruptible-callable", run, answer);
  }

  @PostMapping("/async/slow/interruptible-task")
  @IdempotentEndpoint
  public WebAsyncTask<ResponseEntity<Map<String, Object>>> slowInterruptibleTask() {
    int run = runs.increment();
    CompletableFuture<Void> answer = providerAnswer();
    return new WebAsyncTask<>(() -> interruptibleSend("slow-interruptible-task", run, answer));
  }

  /** A task with its own timeout answer, which the client gets; the key stays claimed. */
  @PostMapping("/async/slow/task-on-timeout")
  @IdempotentEndpoint
  public WebAsyncTask<ResponseEntity<Map<String, Object>>> slowTaskWithItsOwnTimeout() {
    int run = runs.increment();
    CompletableFuture<Void> answer = providerAnswer();
    WebAsyncTask<ResponseEntity<Map<String, Object>>> task =
        new WebAsyncTask<>(() -> interruptibleSend("slow-task-on-timeout", run, answer));
    task.onTimeout(() -> ResponseEntity.status(503).body(Map.of("retry", "later")));
    return task;
  }

  /** The application's own DeferredResult, set once its provider call answers. */
  @PostMapping("/async/slow/deferred")
  @IdempotentEndpoint
  public DeferredResult<ResponseEntity<Map<String, Object>>> slowDeferred() {
    int run = runs.increment();
    DeferredResult<ResponseEntity<Map<String, Object>>> result = new DeferredResult<>();
    providerSends.incrementAndGet();
    providerAnswer().thenRunAsync(() -> result.setResult(created("slow-deferred", run)));
    return result;
  }

  /** A send that then fails with a 404 (the recipient is gone) once the provider answers. */
  @PostMapping("/async/slow/not-found")
  @IdempotentEndpoint
  public CompletableFuture<ResponseEntity<Map<String, Object>>> slowNotFound() {
    runs.increment();
    return providerAnswer()
        .thenApplyAsync(
            answered -> {
              providerSends.incrementAndGet();
              throw new org.springframework.web.server.ResponseStatusException(
                  org.springframework.http.HttpStatus.NOT_FOUND, "the recipient is gone");
            });
  }

  /**
   * The race the end-to-end run met: the handler's future completes (the provider sent, 100 ms in)
   * and the guard hears of it at once, but the copy Spring MVC waits on completes only once {@link
   * #openRaceGate} is called, so the container timeout (1 s) fires in between.
   */
  @PostMapping("/async/race/future")
  @IdempotentEndpoint
  public CompletableFuture<ResponseEntity<Map<String, Object>>> racingFuture() {
    int run = runs.increment();
    GatedCopyFuture<ResponseEntity<Map<String, Object>>> future = new GatedCopyFuture<>(raceGate);
    CompletableFuture.runAsync(
        () -> future.complete(sent("race-future", run)),
        CompletableFuture.delayedExecutor(100, TimeUnit.MILLISECONDS));
    return future;
  }

  private volatile CompletableFuture<Void> raceGate = new CompletableFuture<>();

  /** Lets the copies of {@link #racingFuture} complete; later ones wait for the next call. */
  public void openRaceGate() {
    CompletableFuture<Void> gate = raceGate;
    raceGate = new CompletableFuture<>();
    gate.complete(null);
  }

  /**
   * A future whose {@link #copy()} completes only after a gate opens, on another thread: its own
   * dependents (the guard's) hear of its result first.
   */
  static final class GatedCopyFuture<T> extends CompletableFuture<T> {
    private final CompletableFuture<Void> gate;

    GatedCopyFuture(CompletableFuture<Void> gate) {
      this.gate = gate;
    }

    @Override
    public CompletableFuture<T> copy() {
      CompletableFuture<T> copy = new CompletableFuture<>();
      whenComplete(
          (value, failure) ->
              gate.orTimeout(10, TimeUnit.SECONDS)
                  .whenComplete(
                      (opened, timedOut) -> {
                        if (failure != null) {
                          copy.completeExceptionally(failure);
                        } else {
                          copy.complete(value);
                        }
                      }));
      return copy;
    }
  }

  /** An async result that fails: nothing maps the exception, so a 500. */
  @PostMapping("/async/failing")
  @IdempotentEndpoint
  public CompletableFuture<ResponseEntity<Map<String, Object>>> failing() {
    int run = runs.increment();
    return CompletableFuture.supplyAsync(
        () -> {
          throw new IllegalStateException("the provider failed, run " + run);
        },
        LATER);
  }
}
