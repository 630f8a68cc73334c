package dev.idempotency.examples.providers;

/**
 * An email provider like SparkPost or Postmark: accepts a message with an optional header-style
 * idempotency key.
 */
public final class FakeEmailProvider extends FakeProvider {

  /** Creates the provider. */
  public FakeEmailProvider() {
    super("em_", 1001);
  }

  /**
   * Sends an email.
   *
   * @param to the recipient address
   * @param subject the subject
   * @param body the body
   * @param idempotencyKey the idempotency header value, or {@code null}
   * @return the message id
   * @throws ProviderException if the provider fails
   */
  public String send(String to, String subject, String body, String idempotencyKey)
      throws ProviderException {
    return accept(to, subject + "\n" + body, idempotencyKey);
  }
}
