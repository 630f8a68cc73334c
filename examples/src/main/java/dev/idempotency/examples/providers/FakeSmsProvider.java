package dev.idempotency.examples.providers;

/**
 * An SMS provider like Twilio or Telnyx: accepts a message with an optional header-style
 * idempotency key, and numbers messages {@code n_801}, {@code n_802}, ...
 */
public final class FakeSmsProvider extends FakeProvider {

  /** Creates the provider. */
  public FakeSmsProvider() {
    this(801);
  }

  /**
   * Creates the provider.
   *
   * @param firstNumber the number of its first message: {@code n_<firstNumber>}
   */
  public FakeSmsProvider(int firstNumber) {
    super("n_", firstNumber);
  }

  /**
   * Sends an SMS.
   *
   * @param phone the recipient
   * @param text the message
   * @param idempotencyKey the {@code Idempotency-Key} header value, or {@code null}
   * @return the message id
   * @throws ProviderException if the provider fails
   */
  public String send(String phone, String text, String idempotencyKey) throws ProviderException {
    return accept(phone, text, idempotencyKey);
  }
}
