package dev.idempotency.dynamodb;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import software.amazon.awssdk.http.AbortableInputStream;
import software.amazon.awssdk.http.ExecutableHttpRequest;
import software.amazon.awssdk.http.HttpExecuteRequest;
import software.amazon.awssdk.http.HttpExecuteResponse;
import software.amazon.awssdk.http.SdkHttpClient;
import software.amazon.awssdk.http.SdkHttpResponse;
import software.amazon.awssdk.protocols.jsoncore.JsonNode;
import software.amazon.awssdk.protocols.jsoncore.JsonNodeParser;

/**
 * The real HTTP client with test hooks at the wire: it counts requests by DynamoDB operation
 * ({@code X-Amz-Target}); it can answer every request with an error DynamoDB would send (such as
 * throttling, which dynalite never does) instead of passing it on; it can run an action just before
 * the next request of an operation goes out (to change the table at that moment, as TTL deletion
 * would); and it can make a refused condition carry the item, as DynamoDB does and dynalite does
 * not ({@link ConditionFailureItems}).
 */
final class InterceptedHttpClient implements SdkHttpClient {

  private final SdkHttpClient delegate;
  private final Map<String, AtomicLong> counts = new ConcurrentHashMap<>();
  private final AtomicReference<String> errorType = new AtomicReference<>();
  private final AtomicLong answeredWithError = new AtomicLong();
  private final Map<String, Consumer<JsonNode>> beforeNext = new ConcurrentHashMap<>();
  private final AtomicReference<ConditionFailureItems> itemsOnFailure = new AtomicReference<>();
  private final Map<String, String> loseReply = new ConcurrentHashMap<>();
  private final AtomicLong repliesLost = new AtomicLong();

  InterceptedHttpClient(SdkHttpClient delegate) {
    this.delegate = delegate;
  }

  /** From now on every request gets this DynamoDB error (HTTP 400), or passes again if null. */
  void answerWith(String dynamoErrorType) {
    errorType.set(dynamoErrorType);
  }

  /**
   * Runs {@code action} once, just before the next request of {@code operation} is sent, with that
   * request's JSON body.
   */
  void beforeNext(String operation, Consumer<JsonNode> action) {
    beforeNext.put(operation, action);
  }

  /** Drops the action {@link #beforeNext} left for {@code operation}, if it has not run. */
  void cancelBeforeNext(String operation) {
    beforeNext.remove(operation);
  }

  /**
   * From now on a refused condition carries the item that failed it, as DynamoDB's does (read
   * through the given items' own client, whose requests are not counted); or not, if null.
   */
  void returnItemsOnConditionFailure(ConditionFailureItems items) {
    itemsOnFailure.set(items);
  }

  /**
   * Lets the next request of {@code operation} whose JSON body contains {@code bodyContains} reach
   * DynamoDB, then loses its reply (the connection breaks after the write was applied), so that the
   * SDK sends it again.
   */
  void loseTheReplyOfNext(String operation, String bodyContains) {
    loseReply.put(operation, bodyContains);
  }

  long repliesLost() {
    return repliesLost.get();
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
    Consumer<JsonNode> action = beforeNext.remove(operation);
    if (action != null) {
      action.accept(JsonNodeParser.create().parse(body(request)));
    }
    String lose = loseReply.get(operation);
    if (lose != null
        && new String(body(request), StandardCharsets.UTF_8).contains(lose)
        && loseReply.remove(operation, lose)) {
      return replyLost(request);
    }
    String error = errorType.get();
    ConditionFailureItems items = itemsOnFailure.get();
    if (error == null && items != null) {
      return withItemOnFailure(request, items);
    }
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

  private ExecutableHttpRequest withItemOnFailure(
      HttpExecuteRequest request, ConditionFailureItems items) {
    byte[] requestBody = body(request);
    ExecutableHttpRequest real = delegate.prepareRequest(request);
    return new ExecutableHttpRequest() {
      @Override
      public HttpExecuteResponse call() throws IOException {
        HttpExecuteResponse response = real.call();
        byte[] body;
        try (InputStream in = response.responseBody().orElseThrow()) {
          body = in.readAllBytes();
        }
        return items.answer(requestBody, response, body);
      }

      @Override
      public void abort() {
        real.abort();
      }
    };
  }

  private ExecutableHttpRequest replyLost(HttpExecuteRequest request) {
    ExecutableHttpRequest real = delegate.prepareRequest(request);
    return new ExecutableHttpRequest() {
      @Override
      public HttpExecuteResponse call() throws IOException {
        HttpExecuteResponse applied = real.call();
        try (InputStream in = applied.responseBody().orElseThrow()) {
          in.readAllBytes();
        }
        repliesLost.incrementAndGet();
        throw new IOException("Connection reset (the reply was lost, injected by the test)");
      }

      @Override
      public void abort() {
        real.abort();
      }
    };
  }

  private static byte[] body(HttpExecuteRequest request) {
    try (InputStream in = request.contentStreamProvider().orElseThrow().newStream()) {
      return in.readAllBytes();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
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
