package dev.idempotency.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.OutputStream;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.api.Test;

/**
 * The tests' bound on a whole HTTP exchange: a response whose headers came and whose body never
 * ends (what hung a CI run: the JDK client's request timeout does not cover the body) fails the
 * test with the server's threads, instead of waiting for ever.
 */
class BoundedExchangeTest {

  @Test
  void aBodyThatNeverEndsFailsWithinTheBoundWithTheServersThreads() throws Exception {
    CountDownLatch end = new CountDownLatch(1);
    Thread serverThread = null;
    try (ServerSocket server = new ServerSocket(0)) {
      serverThread =
          new Thread(
              () -> {
                try (Socket client = server.accept()) {
                  client.getInputStream().read(new byte[4096]);
                  OutputStream out = client.getOutputStream();
                  out.write(
                      ("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\n"
                              + "start")
                          .getBytes(StandardCharsets.US_ASCII));
                  out.flush();
                  end.await(); // the other 95 bytes never come
                } catch (Exception ignored) {
                  // the test is over
                }
              },
              "idempotency-test-stalled-body");
      serverThread.setDaemon(true);
      serverThread.start();
      HttpRequest request =
          HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + server.getLocalPort() + "/"))
              .timeout(Duration.ofSeconds(1)) // the client's own timeout: the headers come in time
              .build();
      long start = System.nanoTime();

      assertThatThrownBy(
              () ->
                  BoundedExchange.send(
                      HttpClient.newHttpClient(),
                      request,
                      HttpResponse.BodyHandlers.ofString(),
                      Duration.ofSeconds(2)))
          .isInstanceOf(AssertionError.class)
          .hasMessageContaining("No complete response (headers and body) to GET http://127.0.0.1:")
          .hasMessageContaining("\"idempotency-test-stalled-body\" WAITING")
          .hasMessageContaining("java.util.concurrent.CountDownLatch.await(");
      assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(Duration.ofSeconds(30));
    } finally {
      end.countDown();
      if (serverThread != null) {
        serverThread.join(10_000);
      }
    }
  }
}
