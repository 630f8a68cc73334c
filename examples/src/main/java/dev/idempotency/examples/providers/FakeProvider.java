package dev.idempotency.examples.providers;

import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * What the fake providers share, modelled on real ones: every accepted message is recorded; a
 * repeat of an idempotency key returns the first message's id without sending again (the provider
 * layer of protection); and failures or hangs can be switched on for tests and demos.
 */
public abstract class FakeProvider {

  /** One message the provider accepted. */
  public record Message(String id, String recipient, String content, String idempotencyKey) {}

  /** The provider refused or failed the request. */
  public static final class ProviderException extends Exception {
    /**
     * Creates the exception.
     *
     * @param message what failed
     */
    public ProviderException(String message) {
      super(message);
    }
  }

  private final String idPrefix;
  private final AtomicInteger nextId;
  private final List<Message> accepted = new CopyOnWriteArrayList<>();
  private final Map<String, String> idsByKey = new ConcurrentHashMap<>();
  private final AtomicInteger requests = new AtomicInteger();
  private final AtomicInteger deduplicated = new AtomicInteger();
  private final AtomicInteger failuresToInject = new AtomicInteger();
  private volatile CountDownLatch hold;
  private volatile long delayMillis;

  FakeProvider(String idPrefix, int firstId) {
    this.idPrefix = idPrefix;
    this.nextId = new AtomicInteger(firstId);
  }

  /**
   * Makes the next {@code count} requests fail, as a provider outage would.
   *
   * @param count how many
   */
  public void failNext(int count) {
    failuresToInject.set(count);
  }

  /**
   * Makes every request wait until the latch opens (or 60 seconds pass, then time out), as a slow
   * provider would. {@code null} stops holding.
   *
   * @param latch the latch to wait for
   */
  public void holdUntil(CountDownLatch latch) {
    this.hold = latch;
  }

  /**
   * Makes every request take this long, as a slow provider would.
   *
   * @param delay the delay, zero for none
   */
  public void delay(java.time.Duration delay) {
    this.delayMillis = delay.toMillis();
  }

  /** Accepts a message, honouring the idempotency key. */
  String accept(String recipient, String content, String idempotencyKey) throws ProviderException {
    requests.incrementAndGet();
    CountDownLatch latch = hold;
    if (delayMillis > 0) {
      try {
        Thread.sleep(delayMillis);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new ProviderException("interrupted while sending");
      }
    }
    if (latch != null) {
      try {
        if (!latch.await(60, TimeUnit.SECONDS)) {
          throw new ProviderException("provider timed out");
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new ProviderException("interrupted while sending");
      }
    }
    if (failuresToInject.getAndUpdate(n -> n > 0 ? n - 1 : 0) > 0) {
      throw new ProviderException("provider unavailable (injected)");
    }
    if (idempotencyKey == null) {
      return record(recipient, content, null);
    }
    String[] created = new String[1];
    String id =
        idsByKey.computeIfAbsent(
            idempotencyKey, key -> created[0] = record(recipient, content, key));
    if (created[0] == null) {
      deduplicated.incrementAndGet();
    }
    return id;
  }

  private String record(String recipient, String content, String key) {
    String id = idPrefix + nextId.getAndIncrement();
    accepted.add(new Message(id, Objects.requireNonNull(recipient), content, key));
    return id;
  }

  /**
   * Every message actually sent to a recipient, in order.
   *
   * @return the messages
   */
  public List<Message> accepted() {
    return List.copyOf(accepted);
  }

  /**
   * Every request received, including refused, failed and deduplicated ones.
   *
   * @return the count
   */
  public int requests() {
    return requests.get();
  }

  /**
   * Requests the provider absorbed because their idempotency key was seen before.
   *
   * @return the count
   */
  public int deduplicated() {
    return deduplicated.get();
  }
}
