package dev.idempotency.spring.suite;

import dev.idempotency.spring.BoundedExchange;
import java.io.IOException;
import java.io.OutputStream;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;

/**
 * The entry points a client reaches over real HTTP: the key travels in the {@code Idempotency-Key}
 * header, to an {@code @IdempotentEndpoint}, or to a handler that passes it to an
 * {@code @Idempotent} method.
 */
public enum HttpEntryPoint implements EntryPoint {
  ENDPOINT(Stack.MVC, "/suite/endpoint"),
  ENDPOINT_ASYNC(Stack.MVC, "/suite/endpoint-async"),
  METHOD(Stack.MVC, "/suite/method"),
  METHOD_ASYNC(Stack.MVC, "/suite/method-async"),
  WEBFLUX_ENDPOINT(Stack.WEBFLUX, "/suite/webflux-endpoint"),
  MONO_METHOD(Stack.WEBFLUX, "/suite/mono-method");

  private static final HttpClient HTTP =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

  private final Stack stack;
  private final String path;

  HttpEntryPoint(Stack stack, String path) {
    this.stack = stack;
    this.path = path;
  }

  @Override
  public Stack stack() {
    return stack;
  }

  @Override
  public AutoCloseable begin(int port, String key) throws IOException {
    byte[] body = "{\"to\":\"+15550100\"}".getBytes(StandardCharsets.UTF_8);
    String head =
        "POST "
            + path
            + " HTTP/1.1\r\nHost: 127.0.0.1:"
            + port
            + "\r\nContent-Type: application/json\r\nIdempotency-Key: "
            + key
            + "\r\nContent-Length: "
            + body.length
            + "\r\nConnection: close\r\n\r\n";
    Socket socket = new Socket("127.0.0.1", port);
    OutputStream out = socket.getOutputStream();
    out.write(head.getBytes(StandardCharsets.ISO_8859_1));
    out.write(body);
    out.flush();
    return socket;
  }

  @Override
  public Answer call(int port, String key, Duration timeout)
      throws IOException, InterruptedException {
    HttpRequest request =
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
            .timeout(timeout)
            .header("Content-Type", "application/json")
            .header("Idempotency-Key", key)
            .POST(HttpRequest.BodyPublishers.ofString("{\"to\":\"+15550100\"}"))
            .build();
    HttpResponse<String> response =
        BoundedExchange.send(HTTP, request, HttpResponse.BodyHandlers.ofString());
    return new Answer(
        response.statusCode(),
        response.body(),
        response.headers().firstValue("Retry-After").orElse(null));
  }
}
