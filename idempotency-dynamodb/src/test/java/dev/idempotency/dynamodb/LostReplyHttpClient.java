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

  LostReplyHttpClient(SdkHttpClient delegate) {
    this.delegate = delegate;
  }

  /** Loses the replies of the next {@code count} requests of this operation ({@code PutItem}). */
  void loseNextReplies(String operation, int count) {
    repliesToLose.computeIfAbsent(operation, o -> new AtomicInteger()).addAndGet(count);
  }

  int lost() {
    return lost.get();
  }

  @Override
  public ExecutableHttpRequest prepareRequest(HttpExecuteRequest request) {
    String target =
        request.httpRequest().firstMatchingHeader("X-Amz-Target").orElse("unknown.unknown");
    String operation = target.substring(target.indexOf('.') + 1);
    ExecutableHttpRequest real = delegate.prepareRequest(request);
    AtomicInteger budget = repliesToLose.get(operation);
    if (budget == null || budget.getAndUpdate(n -> Math.max(0, n - 1)) <= 0) {
      return real;
    }
    return new ExecutableHttpRequest() {
      @Override
      public HttpExecuteResponse call() throws IOException {
        HttpExecuteResponse response = real.call();
        if (response.responseBody().isPresent()) {
          try (InputStream body = response.responseBody().get()) {
            body.readAllBytes(); // the server has applied the request and answered
          }
        }
        lost.incrementAndGet();
        throw new IOException("reply lost by the test after dynalite applied the " + operation);
      }

      @Override
      public void abort() {
        real.abort();
      }
    };
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
