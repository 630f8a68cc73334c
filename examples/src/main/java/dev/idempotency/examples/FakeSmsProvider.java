package dev.idempotency.examples;

import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * An SMS provider that behaves like a real one where it matters here: it accepts every message it
 * is given, numbers them {@code n_801}, {@code n_802}, ..., and, like Twilio or Telnyx, honours an
 * optional idempotency key by returning the first message's id for a repeat of that key.
 */
public final class FakeSmsProvider {

  /** One accepted message. */
  public record Message(String id, String phone, String text) {}

  private final AtomicInteger nextId = new AtomicInteger(801);
  private final List<Message> accepted = new CopyOnWriteArrayList<>();
  private final Map<String, String> idsByIdempotencyKey = new ConcurrentHashMap<>();

  /**
   * Sends an SMS.
   *
   * @param phone the recipient
   * @param text the message
   * @param idempotencyKey the provider-side idempotency key, or {@code null}
   * @return the provider's message id
   */
  public String send(String phone, String text, String idempotencyKey) {
    if (idempotencyKey == null) {
      return accept(phone, text);
    }
    return idsByIdempotencyKey.computeIfAbsent(idempotencyKey, k -> accept(phone, text));
  }

  private String accept(String phone, String text) {
    String id = "n_" + nextId.getAndIncrement();
    accepted.add(new Message(id, phone, text));
    return id;
  }

  /**
   * Every message accepted so far, in order.
   *
   * @return the messages
   */
  public List<Message> accepted() {
    return List.copyOf(accepted);
  }
}
