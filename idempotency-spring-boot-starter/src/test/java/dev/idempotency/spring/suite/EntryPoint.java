package dev.idempotency.spring.suite;

import java.io.IOException;
import java.time.Duration;
import java.util.List;

/**
 * One way into the guard in a Spring application, as the suite drives it: how to call it with a
 * key, and what the caller got. Each hazard test runs over {@link #all()}; the sends are counted by
 * the {@link SuiteProvider} behind every entry point.
 *
 * <p>These are the entry points reached over HTTP (the MVC and WebFlux stacks). The listeners,
 * whose caller is the broker, are {@link ListenerEntryPoint}: a message published with the key
 * stands for a call, what became of the delivery for its answer.
 */
public interface EntryPoint {

  /** How long a caller waits for its answer unless a test says otherwise. */
  Duration PATIENT = Duration.ofSeconds(60);

  /** The stack that serves this entry point. */
  Stack stack();

  /**
   * Calls the entry point of the application on {@code port} once with {@code key}, as a client.
   *
   * @throws java.net.http.HttpTimeoutException if the caller gave up after {@code timeout}
   */
  Answer call(int port, String key, Duration timeout) throws IOException, InterruptedException;

  /**
   * Starts a call of the entry point of the application on {@code port} with {@code key}, whose
   * caller disappears (its connection closed, its answer never read) when the result is closed.
   */
  AutoCloseable begin(int port, String key) throws IOException;

  /** Calls the entry point of this stack's shared application, patiently. */
  default Answer call(String key) throws IOException, InterruptedException {
    return call(stack().sharedPort(), key, PATIENT);
  }

  /** Every entry point of the suite. */
  static List<EntryPoint> all() {
    return List.of(HttpEntryPoint.values());
  }
}
