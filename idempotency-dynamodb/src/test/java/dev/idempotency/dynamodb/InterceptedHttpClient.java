package dev.idempotency.dynamodb;

import java.io.ByteArrayInputStream;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import software.amazon.awssdk.http.AbortableInputStream;
import software.amazon.awssdk.http.ExecutableHttpRequest;
import software.amazon.awssdk.http.HttpExecuteRequest;
import software.amazon.awssdk.http.HttpExecuteResponse;
import software.amazon.awssdk.http.SdkHttpClient;
import software.amazon.awssdk.http.SdkHttpResponse;

/**
 * The real HTTP client with two test hooks at the wire: it counts requests by DynamoDB operation
 * ({@code X-Amz-Target}), and it can answer every request with an error DynamoDB would send (such
 * as throttling, which dynalite never does) instead of passing it on.
 */
final class InterceptedHttpClient implements SdkHttpClient {

  private final SdkHttpClient delegate;
  private final Map<String, AtomicLong> counts = new ConcurrentHashMap<>();
  private final AtomicReference<String> errorType = new AtomicReference<>();
  private final AtomicLong answeredWithError = new AtomicLong();

  InterceptedHttpClient(SdkHttpClient delegate) {
    this.delegate = delegate;
  }

  /** From now on every request gets this DynamoDB error (HTTP 400), or passes again if null. */
  void answerWith(String dynamoErrorType) {
    errorType.set(dynamoErrorType);
  }

  long answeredWithError() {
    return answeredWithError.get();
  }

  /** Requests sent so far, by operation ({@code PutItem}, {@code GetItem}, ...). */
  Map<String, Long> counts() {
    Map<String, Long> snapshot = new java.util.TreeMap<>();
    counts.forEach((operation, count) -> snapshot.put(operation, count.get()));
    return snapshot;
  }

  void resetCounts() {
    counts.clear();
  }

  @Override
  public ExecutableHttpRequest prepareRequest(HttpExecuteRequest request) {
    String target =
        request.httpRequest().firstMatchingHeader("X-Amz-Target").orElse("unknown.unknown");
    String operation = target.substring(target.indexOf('.') + 1);
    counts.computeIfAbsent(operation, o -> new AtomicLong()).incrementAndGet();
    String error = errorType.get();
    if (error == null) {
      return delegate.prepareRequest(request);
    }
    answeredWithError.incrementAndGet();
    byte[] body =
        ("{\"__type\":\"com.amazonaws.dynamodb.v20120810#"
                + error
                + "\",\"message\":\"injected by the test\"}")
            .getBytes(StandardCharsets.UTF_8);
    return new ExecutableHttpRequest() {
      @Override
      public HttpExecuteResponse call() {
        return HttpExecuteResponse.builder()
            .response(
                SdkHttpResponse.builder()
                    .statusCode(400)
                    .putHeader("Content-Type", "application/x-amz-json-1.0")
                    .putHeader("x-amzn-RequestId", "injected")
                    .build())
            .responseBody(AbortableInputStream.create(new ByteArrayInputStream(body)))
            .build();
      }

      @Override
      public void abort() {}
    };
  }

  @Override
  public String clientName() {
    return "intercepted-" + delegate.clientName();
  }

  @Override
  public void close() {
    delegate.close();
  }
}
