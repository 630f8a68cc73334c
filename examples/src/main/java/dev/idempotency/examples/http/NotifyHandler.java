package dev.idempotency.examples.http;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpHandler;
import dev.idempotency.IdempotencyException;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.IdempotencyKeyHeader;
import dev.idempotency.IdempotencyKeyReuseException;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.IdempotencyWindows;
import dev.idempotency.KeyStoreException;
import dev.idempotency.Outcome;
import dev.idempotency.ResultCodec;
import dev.idempotency.SendContext;
import dev.idempotency.SendFailedException;
import dev.idempotency.examples.providers.FakeEmailProvider;
import dev.idempotency.examples.providers.FakePushProvider;
import dev.idempotency.examples.providers.FakeSmsProvider;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * {@code POST /notify} with an {@code Idempotency-Key} header, as the IETF draft describes:
 *
 * <ul>
 *   <li>first request: sends through the channel's provider, {@code 200} with {@code
 *       notification_id};
 *   <li>repeat with the same key and body: the same response plus {@code Idempotent-Replayed:
 *       true}, no second send;
 *   <li>repeat while the first is still sending: waits briefly, then {@code 409} with {@code
 *       Retry-After};
 *   <li>same key, different body: {@code 422} (the body's canonical hash is the fingerprint);
 *   <li>missing or malformed key or body: {@code 400}; store unavailable: {@code 503}, nothing
 *       sent; provider failure: {@code 502}, and a retry may send.
 * </ul>
 *
 * <p>Errors are {@code application/problem+json} (RFC 9457).
 */
public final class NotifyHandler implements HttpHandler {

  /** The header that marks a replayed response. */
  public static final String REPLAYED_HEADER = "Idempotent-Replayed";

  private static final int MAX_BODY_BYTES = 64 * 1024;

  private final IdempotencyGuard guard;
  private final FakeSmsProvider sms;
  private final FakeEmailProvider email;
  private final FakePushProvider push;

  /**
   * Creates the handler.
   *
   * @param guard the guard
   * @param sms the SMS provider
   * @param email the email provider
   * @param push the push provider
   */
  public NotifyHandler(
      IdempotencyGuard guard, FakeSmsProvider sms, FakeEmailProvider email, FakePushProvider push) {
    this.guard = guard;
    this.sms = sms;
    this.email = email;
    this.push = push;
  }

  @Override
  public void handle(HttpExchange exchange) throws IOException {
    try (exchange) {
      if (!"POST".equals(exchange.getRequestMethod())) {
        exchange.getResponseHeaders().add("Allow", "POST");
        problem(exchange, new Problem(405, "about:blank", "Method Not Allowed", "use POST"));
        return;
      }
      String key;
      NotificationRequest request;
      String body;
      Object parsed;
      try {
        key =
            IdempotencyKeyHeader.parse(
                exchange.getRequestHeaders().getFirst(IdempotencyKeyHeader.NAME));
        body = readBody(exchange.getRequestBody());
        parsed = Json.parse(body);
        request = NotificationRequest.from(parsed);
      } catch (IllegalArgumentException e) {
        problem(exchange, new Problem(400, "/problems/bad-request", "Bad Request", e.getMessage()));
        return;
      }
      respond(exchange, key, request, Json.fingerprint(parsed));
    }
  }

  private void respond(
      HttpExchange exchange, String key, NotificationRequest request, String fingerprint)
      throws IOException {
    try {
      Outcome<String> outcome =
          guard.executeForOutcome(
              IdempotencyRequest.of(
                      IdempotencyKey.of("notify", key), IdempotencyWindows.TRANSACTIONAL)
                  .withFingerprint(fingerprint),
              ResultCodec.string(),
              context -> send(request, context));
      if (outcome.replayed()) {
        exchange.getResponseHeaders().add(REPLAYED_HEADER, "true");
      }
      write(exchange, 200, "application/json", outcome.value());
    } catch (IdempotencyInProgressException e) {
      exchange.getResponseHeaders().add("Retry-After", "1");
      problem(
          exchange,
          new Problem(
              409,
              "/problems/request-in-progress",
              "Conflict",
              "a request with this Idempotency-Key is still being processed; retry later"));
    } catch (IdempotencyKeyReuseException e) {
      problem(
          exchange,
          new Problem(
              422,
              "/problems/key-reused",
              "Unprocessable Content",
              "this Idempotency-Key was already used with a different request body"));
    } catch (KeyStoreException e) {
      exchange.getResponseHeaders().add("Retry-After", "5");
      problem(
          exchange,
          new Problem(
              503,
              "/problems/store-unavailable",
              "Service Unavailable",
              "the idempotency store is unavailable; nothing was sent"));
    } catch (SendFailedException e) {
      problem(
          exchange,
          new Problem(
              502,
              "/problems/provider-failed",
              "Bad Gateway",
              "the provider failed: " + e.getCause().getMessage() + "; retrying is safe"));
    } catch (IdempotencyException e) {
      problem(
          exchange,
          new Problem(
              500, "/problems/idempotency", "Internal Server Error", e.getClass().getSimpleName()));
    }
  }

  /** Sends through the channel's provider, passing the provider key: the second layer. */
  private String send(NotificationRequest request, SendContext context) throws Exception {
    String id =
        switch (request.channel()) {
          case "sms" -> sms.send(request.recipient(), request.render(), context.providerKey());
          case "email" ->
              email.send(
                  request.recipient(), request.template(), request.render(), context.providerKey());
          default -> push.send(request.recipient(), request.render(), context.providerUuid());
        };
    Map<String, Object> response = new LinkedHashMap<>();
    response.put("notification_id", id);
    response.put("channel", request.channel());
    return Json.write(response);
  }

  private static String readBody(InputStream in) throws IOException {
    byte[] bytes = in.readNBytes(MAX_BODY_BYTES + 1);
    if (bytes.length > MAX_BODY_BYTES) {
      throw new IllegalArgumentException("the body is larger than " + MAX_BODY_BYTES + " bytes");
    }
    return new String(bytes, StandardCharsets.UTF_8);
  }

  private static void problem(HttpExchange exchange, Problem problem) throws IOException {
    write(exchange, problem.status(), "application/problem+json", problem.json());
  }

  private static void write(HttpExchange exchange, int status, String type, String body)
      throws IOException {
    byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
    exchange.getResponseHeaders().add("Content-Type", type);
    exchange.sendResponseHeaders(status, bytes.length);
    try (OutputStream out = exchange.getResponseBody()) {
      out.write(bytes);
    }
  }
}
