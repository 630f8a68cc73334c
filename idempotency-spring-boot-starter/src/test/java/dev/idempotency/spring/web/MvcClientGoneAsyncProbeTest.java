package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.web.MvcProbes.HeldSends;
import java.io.OutputStream;
import java.net.Socket;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;

/**
 * probeE: a client that goes away while an async {@link IdempotentEndpoint} handler's send runs
 * (Tomcat, no async timeout in the way: 60 s), then retries at once and again after the send ended.
 * SPEC 13: "A container async timeout (or a client that goes away) ends the request, not the send:
 * while the handler's work still runs the key stays claimed (repeats get 409), and its result is
 * stored when it completes." The client writes the request on a raw socket, waits until the handler
 * started, and closes the socket (FIN, or RST with linger 0); for 1.5 s its retries must all get
 * 409 with the handler not run again; then the send is let go and the retry must get the first
 * run's response replayed: one handler run.
 */
@SpringBootTest(
    classes = MvcProbes.HeldSendApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
    properties = {
      "idempotency.store=memory",
      "spring.mvc.async.request-timeout=60s",
      "idempotency.close-grace-period=1s"
    })
class MvcClientGoneAsyncProbeTest implements EndpointClient {

  @LocalServerPort int port;

  @Override
  public int port() {
    return port;
  }

  @Override
  public int runs() {
    return HeldSends.runs.get();
  }

  @BeforeEach
  void reset() {
    HeldSends.gate = new CountDownLatch(1);
  }

  @ParameterizedTest
  @CsvSource({"callable, fin", "future, rst", "deferred, fin", "task, rst"})
  void aClientThatGoesAwayMidSendKeepsTheKeyClaimedAndGetsTheSendReplayed(String kind, String close)
      throws Exception {
    String key = EndpointClient.newKey();
    String path = "/probe/held/" + kind;
    int before = HeldSends.runs.get();
    List<String> whileSending = new ArrayList<>();
    HttpResponse<byte[]> replay;
    try {
      try (Socket socket = new Socket("127.0.0.1", port)) {
        OutputStream out = socket.getOutputStream();
        out.write(
            ("POST "
                    + path
                    + " HTTP/1.1\r\nHost: 127.0.0.1\r\nIdempotency-Key: "
                    + key
                    + "\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
                .getBytes(StandardCharsets.US_ASCII));
        out.flush();
        MvcProbes.awaitHandlerStart(HeldSends.runs::get, before);
        assertThat(HeldSends.runs.get() - before).as("the handler started").isEqualTo(1);
        if (close.equals("rst")) {
          socket.setSoLinger(true, 0);
        }
      }
      // the client retries at once and keeps retrying while the send runs (1.5 s)
      long until = System.nanoTime() + Duration.ofMillis(1500).toNanos();
      while (System.nanoTime() < until) {
        HttpResponse<byte[]> retry = post(path, key, "{}");
        if (retry.statusCode() != 409) {
          whileSending.add(retry.statusCode() + " " + EndpointClient.text(retry));
        }
        Thread.sleep(100);
      }
    } finally {
      HeldSends.gate.countDown();
    }
    replay = MvcProbes.retryWhileInProgress(this, path, key);

    String answers =
        String.format(
            "non-409 answers while the send ran: %s; after it: %s",
            whileSending, MvcProbes.replayed(replay));
    assertThat(HeldSends.runs.get() - before)
        .as("handler runs (sends) for one key (%s)", answers)
        .isEqualTo(1);
    assertThat(whileSending).as(answers).isEmpty();
    assertThat(replay.statusCode()).as(answers).isEqualTo(201);
    assertThat(EndpointClient.header(replay, "Idempotent-Replayed")).as(answers).isEqualTo("true");
    assertThat(EndpointClient.text(replay)).as(answers).contains("sent-" + (before + 1));
  }
}
