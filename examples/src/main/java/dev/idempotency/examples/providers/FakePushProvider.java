package dev.idempotency.examples.providers;

import java.util.Objects;
import java.util.UUID;

/**
 * A push provider like APNs or OneSignal, whose idempotency field must be a UUID ({@code apns-id},
 * OneSignal {@code idempotency_key}).
 */
public final class FakePushProvider extends FakeProvider {

  /** Creates the provider. */
  public FakePushProvider() {
    super("push_", 5001);
  }

  /**
   * Sends a push notification.
   *
   * @param deviceToken the device
   * @param payload the alert
   * @param notificationId the request's UUID, required as by APNs
   * @return the message id
   * @throws ProviderException if the provider fails
   */
  public String send(String deviceToken, String payload, UUID notificationId)
      throws ProviderException {
    return accept(deviceToken, payload, Objects.requireNonNull(notificationId).toString());
  }
}
