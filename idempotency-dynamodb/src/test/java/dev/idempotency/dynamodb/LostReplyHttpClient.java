package dev.idempotency.dynamodb;

import java.io.IOException;
import java.io.InputStream;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import software.amazon.awssdk.http.ExecutableHttpRequest;
import software.amazon.awssdk.http.HttpExecuteRequest;
import software.amazon.awssdk.http.HttpExecuteResponse;
import software.amazon.awssdk.http.SdkHttpClient;

/**
 * The real HTTP client, which can lose replies: the request reaches dynalite and is applied, then
 * the reply is read and thrown away and the SDK sees an {@link IOException} (a connection reset
 * after the server answered), which its retry strategy retries.
 */
final class LostReplyHttpClient implements SdkHttpClient {

  private final SdkHttpClient delegate;
  private final Map<String, AtomicInteger> repliesToLose = new ConcurrentHashMap<>();
  private final AtomicInteger lost = new AtomicInteger();
  private final Map<String, Long> delayed = new ConcurrentHashMap<>();
  private final java.util.concurrent.atomic.AtomicReference<String> lostBodyText =
      new java.util.concurrent.atomic.AtomicReference<>();
  private final Map<String, AtomicInteger> sent = new ConcurrentHashMap<>();

  LostReplyHttpClient(SdkHttpClient delegate) {
    this.delegate = delegate;
  }

  /** Loses the replies of the next {@code count} requests of this operation ({@code PutItem}). */
  void loseNextReplies(String operation, int count) {
    repliesToLose.computeIfAbsent(operation, o -> new AtomicInteger()).addAndGet(count);
  }

  /**
   * Holds the reply of the next request of this operation for {@code millis} after dynalite has
   * answered (a slow network or store), longer than the store's attempt timeout in the tests.
   */
  void delayNextReply(String operation, long millis) {
    delayed.put(operation, millis);
  }

  /** Loses the reply of the next request whose JSON body contains this text (once). */
  void loseNextReplyTo(String bodyText) {
    lostBodyText.set(bodyText);
  }

  int lost() {
    return lost.get();
  }

  /** Requests of this operation sent so far. */
  int sent(String operation) {
    AtomicInteger count = sent.get(operation);
    return count == null ? 0 : count.get();
  }

  @Override
  public ExecutableHttpRequest prepareRequest(HttpExecuteRequest request) {
    String target =
        request.httpRequest().firstMatchingHeader("X-Amz-Target").orElse("unknown.unknown");
    String operation = target.substring(target.indexOf('.') + 1);
    sent.computeIfAbsent(operation, o -> new AtomicInteger()).incrementAndGet();
    ExecutableHttpRequest real = delegate.prepareRequest(request);
    AtomicInteger budget = repliesToLose.get(operation);
    boolean byOperation = budget != null && budget.getAndUpdate(n -> Math.max(0, n - 1)) > 0;
    String text = lostBodyText.get();
    boolean byBody =
        text != null && body(request).contains(text) && lostBodyText.compareAndSet(text, null);
    Long delay = delayed.remove(operation);
    if (delay != null) {
      return new ExecutableHttpRequest() {
        @Override
        public HttpExecuteResponse call() throws IOException {
          HttpExecuteResponse response = real.call(); // applied and answered
          long until =
              System.nanoTime() + java.util.concurrent.TimeUnit.MILLISECONDS.toNanos(delay);
          while (System.nanoTime() < until && !Thread.currentThread().isInterrupted()) {
            java.util.concurrent.locks.LockSupport.parkNanos(until - System.nanoTime());
          }
          return response;
        }

        @Override
        public void abort() {
          real.abort();
        }
      };
    }
    if (!byOperation && !byBody) {
      return real;
    }
    return new ExecutableHttpRequest() {
      private volatile boolean answered;

      @Override
      public HttpExecuteResponse call() throws IOException {
        HttpExecuteResponse response = real.call();
        if (response.responseBody().isPresent()) {
          try (InputStream body = response.responseBody().get()) {
            body.readAllBytes(); // the server has applied the request and answered
          }
        }
        answered = true;
        lost.incrementAndGet();
        throw new IOException("reply lost by the test after dynalite applied the " + operation);
      }

      @Override
      public void abort() {
        // once the reply was read in full its connection went back to the pool, where another
        // request may be using it now: disconnecting it would cut that request off (and dynalite
        // exits when a client closes a request it is still answering)
        if (!answered) {
          real.abort();
        }
      }
    };
  }

  private static String body(HttpExecuteRequest request) {
    if (request.contentStreamProvider().isEmpty()) {
      return "";
    }
    try (InputStream in = request.contentStreamProvider().get().newStream()) {
      return new String(in.readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  @Override
  public String clientName() {
    return "lost-reply-" + delegate.clientName();
  }

  @Override
  public void close() {
    delegate.close();
  }
}
