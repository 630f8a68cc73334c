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
   * The provider of the slow handlers: sends 3 s after it was called, counted per send: Tomcat
   * looks for expired async requests once a second, so a container timeout of 1 s fires between 1
   * and 2 s, and the send must come after that even on a busy machine.
   */
  private static final Executor PROVIDER = CompletableFuture.delayedExecutor(3, TimeUnit.SECONDS);

  private final AtomicInteger providerSends = new AtomicInteger();

  /** How often the slow handlers' provider sent. */
  public int providerSends() {
    return providerSends.get();
  }

  private ResponseEntity<Map<String, Object>> sent(String kind, int run) {
    providerSends.incrementAndGet();
    return created(kind, run);
  }

  /** Async handlers whose provider call (3 s) outlives a container timeout of 1 s. */
  @PostMapping("/async/slow/future")
  @IdempotentEndpoint
  public CompletableFuture<ResponseEntity<Map<String, Object>>> slowFuture() {
    int run = runs.increment();
    return CompletableFuture.supplyAsync(() -> sent("slow-future", run), PROVIDER);
  }

  @PostMapping("/async/slow/callable")
  @IdempotentEndpoint
  public Callable<ResponseEntity<Map<String, Object>>> slowCallable() {
    int run = runs.increment();
    return () -> CompletableFuture.supplyAsync(() -> sent("slow-callable", run), PROVIDER).join();
  }

  /**
   * The provider call as a real client makes it: the provider has the request at once (counted),
   * and the caller blocks, interruptibly, for its answer (3 s).
   */
  private ResponseEntity<Map<String, Object>> interruptibleSend(String kind, int run) {
    providerSends.incrementAndGet();
    try {
      CompletableFuture.runAsync(() -> {}, PROVIDER).get();
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
    return () -> interruptibleSend("slow-interruptible-callable", run);
  }

  @PostMapping("/async/slow/interruptible-task")
  @IdempotentEndpoint
  public WebAsyncTask<ResponseEntity<Map<String, Object>>> slowInterruptibleTask() {
    int run = runs.increment();
    return new WebAsyncTask<>(() -> interruptibleSend("slow-interruptible-task", run));
  }

  /** A task with its own timeout answer, which the client gets; the key stays claimed. */
  @PostMapping("/async/slow/task-on-timeout")
  @IdempotentEndpoint
  public WebAsyncTask<ResponseEntity<Map<String, Object>>> slowTaskWithItsOwnTimeout() {
    int run = runs.increment();
    WebAsyncTask<ResponseEntity<Map<String, Object>>> task =
        new WebAsyncTask<>(() -> interruptibleSend("slow-task-on-timeout", run));
    task.onTimeout(() -> ResponseEntity.status(503).body(Map.of("retry", "later")));
    return task;
  }

  /** The application's own DeferredResult, set by its provider call 3 s later. */
  @PostMapping("/async/slow/deferred")
  @IdempotentEndpoint
  public DeferredResult<ResponseEntity<Map<String, Object>>> slowDeferred() {
    int run = runs.increment();
    DeferredResult<ResponseEntity<Map<String, Object>>> result = new DeferredResult<>();
    providerSends.incrementAndGet();
    PROVIDER.execute(() -> result.setResult(created("slow-deferred", run)));
    return result;
  }

  /** A send that then fails with a 404 (the recipient is gone), 3 s after the call. */
  @PostMapping("/async/slow/not-found")
  @IdempotentEndpoint
  public CompletableFuture<ResponseEntity<Map<String, Object>>> slowNotFound() {
    runs.increment();
    return CompletableFuture.supplyAsync(
        () -> {
          providerSends.incrementAndGet();
          throw new org.springframework.web.server.ResponseStatusException(
              org.springframework.http.HttpStatus.NOT_FOUND, "the recipient is gone");
        },
        PROVIDER);
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
