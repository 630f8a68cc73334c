package dev.idempotency.spring.web;

import dev.idempotency.spring.BoundedExchange;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.UUID;

/**
 * A client of the test application over real HTTP, for the endpoint test cases: {@link
 * EndpointContract} implements it for each store.
 */
interface EndpointClient {

  HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

  /** The application's port. */
  int port();

  /** How often the test application's handlers ran since the test started. */
  int runs();

  /** A fresh key, quoted as the IETF draft sends it. */
  static String newKey() {
    return "\"" + UUID.randomUUID() + "\"";
  }

  static String text(HttpResponse<byte[]> response) {
    return new String(response.body(), StandardCharsets.UTF_8);
  }

  static String header(HttpResponse<?> response, String name) {
    return response.headers().firstValue(name).orElse(null);
  }

  /** Sends a request with an Idempotency-Key (none if {@code key} is null). */
  default HttpResponse<byte[]> send(
      String method,
      String path,
      String key,
      String contentType,
      HttpRequest.BodyPublisher body,
      String... headers)
      throws Exception {
    HttpRequest.Builder request =
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port() + path))
            .timeout(Duration.ofSeconds(60))
            .method(method, body);
    if (contentType != null) {
      request.header("Content-Type", contentType);
    }
    if (key != null) {
      request.header("Idempotency-Key", key);
    }
    for (int i = 0; i < headers.length; i += 2) {
      request.header(headers[i], headers[i + 1]);
    }
    return BoundedExchange.send(HTTP, request.build(), HttpResponse.BodyHandlers.ofByteArray());
  }

  /** POSTs a JSON body. */
  default HttpResponse<byte[]> post(String path, String key, String json, String... headers)
      throws Exception {
    return send(
        "POST", path, key, "application/json", HttpRequest.BodyPublishers.ofString(json), headers);
  }
}
