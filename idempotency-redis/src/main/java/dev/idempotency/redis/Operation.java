package dev.idempotency.redis;

import dev.idempotency.KeyStoreException;
import dev.idempotency.spi.OperationDeadlines;
import io.lettuce.core.RedisCommandExecutionException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Supplier;

/**
 * One store operation (a claim, a completion, ...): the Redis commands it sends, bounded in time as
 * a whole by the store's operation timeout, whatever the client's own command timeout. When the
 * time is up the operation fails with {@link KeyStoreException} and every command it sent that has
 * not been answered is cancelled: a command Lettuce holds back while disconnected is then never
 * written. A command already written to a Redis that stalled is run when Redis goes on, whatever
 * the cancel: a claim given up on then takes effect late, and the guard takes it back (a release
 * fenced by its owner token, in the background).
 *
 * <p>An operation whose caller blocks for it ({@link #awaited}) is bounded by that caller's own
 * timed wait; one whose future is handed out ({@link #Operation(String, Duration)}) is watched by
 * {@link OperationDeadlines}. The blocking form thus adds no watch and no future of its own to the
 * command's: in a profile of replays at one thread (BENCHMARKS.md, run 17) they took 2.8 % of the
 * calling thread's CPU samples and 1 % of Lettuce's event loop's.
 */
final class Operation {

  private final String name;
  private final Duration timeout;
  private final long timeoutMillis;
  private final boolean awaited;
  private final List<CompletableFuture<?>> commands = new CopyOnWriteArrayList<>();
  private volatile boolean abandoned;

  /** An operation whose future is handed out: a watch bounds it. */
  Operation(String name, Duration timeout) {
    this(name, timeout, false);
  }

  private Operation(String name, Duration timeout, boolean awaited) {
    this.name = name;
    this.timeout = timeout;
    this.timeoutMillis = timeout.toMillis();
    this.awaited = awaited;
  }

  /**
   * An operation that only its caller's {@link #await} ever waits for, on the calling thread: that
   * wait bounds it, and {@link #bounded} leaves its futures as they are.
   */
  static Operation awaited(String name, Duration timeout) {
    return new Operation(name, timeout, true);
  }

  /** Sends a command of this operation, unless it was abandoned (timed out) meanwhile. */
  <T> CompletableFuture<T> send(Supplier<CompletableFuture<T>> command) {
    if (abandoned) {
      return CompletableFuture.failedFuture(timedOut());
    }
    try {
      CompletableFuture<T> sent = command.get();
      commands.add(sent);
      return sent;
    } catch (RuntimeException e) {
      return CompletableFuture.failedFuture(e);
    }
  }

  /**
   * The operation's result, failing with {@link KeyStoreException} on any error, or once the
   * timeout has passed (then cancelling what is still pending).
   */
  <T> CompletableFuture<T> bounded(CompletableFuture<T> result) {
    if (awaited) {
      return result;
    }
    CompletableFuture<T> bounded = new CompletableFuture<>();
    OperationDeadlines.Watch watch =
        OperationDeadlines.watch(
            timeout, () -> bounded.completeExceptionally(new TimeoutException()));
    result.whenComplete(
        (value, error) -> {
          watch.done();
          if (error != null) {
            bounded.completeExceptionally(error);
          } else {
            bounded.complete(value);
          }
        });
    return bounded.exceptionallyCompose(
        error -> {
          Throwable cause = unwrap(error);
          if (cause instanceof TimeoutException) {
            abandon();
            return CompletableFuture.failedFuture(timedOut());
          }
          return CompletableFuture.failedFuture(failed(cause));
        });
  }

  /**
   * Waits for a {@linkplain #bounded bounded} result; the caller's blocking form of it. An
   * {@linkplain #awaited awaited} operation waits at most its timeout here, then is abandoned.
   */
  <T> T await(CompletableFuture<T> bounded) {
    try {
      return awaited ? bounded.get(timeout.toNanos(), TimeUnit.NANOSECONDS) : bounded.get();
    } catch (ExecutionException e) {
      throw failed(e.getCause());
    } catch (CancellationException e) {
      throw failed(e);
    } catch (TimeoutException e) {
      abandon();
      throw timedOut();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      abandon();
      throw new KeyStoreException("Redis store: interrupted while waiting to " + name, e);
    }
  }

  private void abandon() {
    abandoned = true;
    for (CompletableFuture<?> command : commands) {
      command.cancel(false);
    }
  }

  private KeyStoreException timedOut() {
    return new KeyStoreException(
        "Redis store did not " + name + " within " + timeoutMillis + " ms (operation timeout)",
        null);
  }

  KeyStoreException failed(Throwable error) {
    Throwable cause = unwrap(error);
    if (cause instanceof KeyStoreException e) {
      return e;
    }
    if (cause instanceof RedisCommandExecutionException
        && String.valueOf(cause.getMessage()).startsWith("WRONGTYPE")) {
      // the key holds another Redis type: that record's error, not an outage (issue 37)
      return RecordValue.unreadable("a value of another Redis type", cause);
    }
    return new KeyStoreException(
        "Redis store failed to " + name + ": " + cause.getClass().getSimpleName(), cause);
  }

  static Throwable unwrap(Throwable error) {
    Throwable t = error;
    while ((t instanceof CompletionException || t instanceof ExecutionException)
        && t.getCause() != null) {
      t = t.getCause();
    }
    return t;
  }
}
