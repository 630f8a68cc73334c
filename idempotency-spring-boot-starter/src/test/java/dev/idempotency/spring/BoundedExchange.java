package dev.idempotency.spring;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadInfo;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.locks.LockSupport;

/**
 * An HTTP exchange of the tests with a bound on the whole of it, headers and body: the JDK client's
 * per-request timeout ends when the headers arrive, so a body that never ends hung a CI run until
 * it was killed. When the bound passes, the test fails with the threads of this JVM (the test
 * application's server runs in it) that a hang is made of: Reactor Netty's event loops, the guard's
 * threads, Lettuce's, Reactor's schedulers and Tomcat's.
 */
public final class BoundedExchange {

  /** How long a whole exchange may take: generous for a busy 2-core machine. */
  public static final Duration EXCHANGE_TIMEOUT = Duration.ofSeconds(60);

  private static final String[] SERVER_THREADS = {
    "reactor-http-", "idempotency-", "lettuce-", "parallel-", "boundedElastic-", "http-nio-"
  };

  private BoundedExchange() {}

  /**
   * Sends the request and waits for the whole response, body included, at most {@link
   * #EXCHANGE_TIMEOUT}.
   *
   * @throws IOException as {@link HttpClient#send} would
   * @throws AssertionError when the response is not complete in time, with a thread dump
   */
  public static <T> HttpResponse<T> send(
      HttpClient client, HttpRequest request, HttpResponse.BodyHandler<T> body)
      throws IOException, InterruptedException {
    return send(client, request, body, EXCHANGE_TIMEOUT);
  }

  /**
   * Sends {@code request} until its answer is not {@code 409} (the key's first call still in flight
   * or being recorded) or {@code within} has passed, polling every 20 ms; returns the last answer,
   * its body as a string.
   */
  public static HttpResponse<String> sendWhileInFlight(
      HttpClient client, HttpRequest request, Duration within)
      throws IOException, InterruptedException {
    long deadline = System.nanoTime() + within.toNanos();
    HttpResponse<String> response = send(client, request, HttpResponse.BodyHandlers.ofString());
    while (response.statusCode() == 409 && System.nanoTime() < deadline) {
      Thread.sleep(20);
      response = send(client, request, HttpResponse.BodyHandlers.ofString());
    }
    return response;
  }

  /**
   * Like {@link #send(HttpClient, HttpRequest, HttpResponse.BodyHandler)}, within {@code bound}.
   */
  static <T> HttpResponse<T> send(
      HttpClient client, HttpRequest request, HttpResponse.BodyHandler<T> body, Duration bound)
      throws IOException, InterruptedException {
    CompletableFuture<HttpResponse<T>> exchange = client.sendAsync(request, body);
    try {
      return exchange.get(bound.toMillis(), TimeUnit.MILLISECONDS);
    } catch (TimeoutException hung) {
      exchange.cancel(true);
      throw new AssertionError(
          "No complete response (headers and body) to "
              + request.method()
              + " "
              + request.uri()
              + " within "
              + bound.toMillis()
              + " ms. The server's threads:\n"
              + serverThreads(),
          hung);
    } catch (ExecutionException failed) {
      Throwable cause = failed.getCause();
      if (cause instanceof IOException io) {
        throw io;
      }
      if (cause instanceof RuntimeException runtime) {
        throw runtime;
      }
      if (cause instanceof Error error) {
        throw error;
      }
      throw new IOException(cause);
    }
  }

  /**
   * The stacks of this JVM's server-side threads, whole, with what each waits on. A thread that
   * runs while it still names a park blocker gave up a park by an exception (a blocking-call
   * detector that throws from inside a lock leaves that lock's queue broken).
   */
  public static String serverThreads() {
    StringBuilder dump = new StringBuilder();
    Map<Long, ThreadInfo> infos = new java.util.HashMap<>();
    for (ThreadInfo info : ManagementFactory.getThreadMXBean().dumpAllThreads(true, true)) {
      infos.put(info.getThreadId(), info);
    }
    for (Map.Entry<Thread, StackTraceElement[]> entry : Thread.getAllStackTraces().entrySet()) {
      Thread thread = entry.getKey();
      if (!isServerThread(thread.getName())) {
        continue;
      }
      dump.append('"').append(thread.getName()).append("\" ").append(thread.getState());
      ThreadInfo info = infos.get(thread.getId());
      if (info != null && info.getLockName() != null) {
        dump.append(" on ").append(info.getLockName());
        if (info.getLockOwnerName() != null) {
          dump.append(" owned by \"").append(info.getLockOwnerName()).append('"');
        }
      }
      Object blocker = LockSupport.getBlocker(thread);
      if (blocker != null && thread.getState() == Thread.State.RUNNABLE) {
        dump.append(" (runs, yet still names park blocker ")
            .append(blocker.getClass().getName())
            .append('@')
            .append(Integer.toHexString(System.identityHashCode(blocker)))
            .append(": a park it gave up by an exception)");
      }
      dump.append('\n');
      for (StackTraceElement frame : entry.getValue()) {
        dump.append("\tat ").append(frame).append('\n');
      }
    }
    return dump.toString();
  }

  private static boolean isServerThread(String name) {
    for (String prefix : SERVER_THREADS) {
      if (name.startsWith(prefix)) {
        return true;
      }
    }
    return false;
  }
}
