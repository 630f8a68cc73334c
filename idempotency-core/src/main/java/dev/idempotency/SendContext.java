package dev.idempotency;

import java.util.Objects;
import java.util.UUID;
import java.util.function.BooleanSupplier;

/**
 * What a {@link Sender} knows about the send it performs. The provider key and UUID are derived
 * from the key when first asked for. Immutable and thread-safe.
 */
public final class SendContext {

  private final String key;
  private final int attempt;
  private volatile String providerKey;
  private volatile UUID providerUuid;
  private final BooleanSupplier leaseHeld;

  /**
   * Creates a context with given provider keys (for tests and adapters).
   *
   * @param key the caller's idempotency key
   * @param providerKey the provider idempotency key
   * @param providerUuid the provider UUID
   * @param attempt the attempt, at least 1
   */
  public SendContext(String key, String providerKey, UUID providerUuid, int attempt) {
    this(key, attempt);
    this.providerKey = Objects.requireNonNull(providerKey, "providerKey");
    this.providerUuid = Objects.requireNonNull(providerUuid, "providerUuid");
  }

  private SendContext(String key, int attempt) {
    this(key, attempt, () -> true);
  }

  private SendContext(String key, int attempt, BooleanSupplier leaseHeld) {
    this.leaseHeld = leaseHeld;
    this.key = Objects.requireNonNull(key, "key");
    if (attempt < 1) {
      throw new IllegalArgumentException("attempt must be at least 1, was " + attempt);
    }
    this.attempt = attempt;
  }

  /** The guard's context: provider keys derived from the key on first use. */
  static SendContext lazy(String key, int attempt) {
    return new SendContext(key, attempt);
  }

  /** The guard's context of a send under a claim, which {@link #leaseHeld()} checks again. */
  static SendContext lazy(String key, int attempt, BooleanSupplier leaseHeld) {
    return new SendContext(key, attempt, leaseHeld);
  }

  /**
   * Whether the guard still holds this send's key, checked now: its lease has not lapsed, was not
   * taken over and is not being released after the sender failed (threw, or a batch item was
   * reported failed), and is renewed (fenced, a blocking store call) if it is due; a renewal the
   * store fails to answer (rather than refuses) is tried once more at once. The guard checks this
   * itself just before it calls the sender; a sender that hands its work on and starts the provider
   * call later (a task queued on an executor) checks it again just before that call and sends
   * nothing if it is {@code false}, since another caller may have taken the key over, or will once
   * the lease nobody could renew runs out. Ask it only before the provider call, never after.
   *
   * <p>Once it has answered {@code false} to a send of {@link IdempotencyGuard#execute} or {@code
   * executeAsync}, that send is taken as not sent, however the sender ends: a sender that throws
   * has the key released as for any failure; one that returns normally (or completes its stage) has
   * its result discarded, not recorded as the key's outcome, the key taken back, fenced, if it is
   * still this call's, and the caller gets a {@link KeyStoreException} saying nothing was sent: a
   * retry sends once. (A result recorded there would be replayed to every repeat, and the message
   * never sent.) So it answers {@code false} from then on, without asking the store again, even
   * where a renewal that came too late the first time would succeed now. A batch's item reports it
   * failed instead ({@link Batch#failed}); a batch item already handed out is not lost by a renewal
   * the store fails to answer: the keeper tries that renewal again. Always {@code true} for a
   * context the guard did not make (tests, adapters), for a send without a claim (fail-open) and
   * for a send inside the caller's transaction ({@link IdempotencyGuard#executeInTransaction}),
   * whose claim the transaction holds until it ends.
   *
   * @return {@code true} if a provider call may start now under this key
   */
  public boolean leaseHeld() {
    return leaseHeld.getAsBoolean();
  }

  /**
   * The caller's idempotency key.
   *
   * @return the key
   */
  public String key() {
    return key;
  }

  /**
   * A stable key for the provider's idempotency header or field, derived from the key: 43
   * characters of {@code [A-Za-z0-9_-]}, the same in every process and on every attempt.
   *
   * @return the provider key
   */
  public String providerKey() {
    String value = providerKey;
    if (value == null) {
      value = Digests.providerKey(key);
      providerKey = value;
    }
    return value;
  }

  /**
   * A name-based (version 5) UUID of the key, for providers that require a UUID (OneSignal {@code
   * idempotency_key}, APNs {@code apns-id}).
   *
   * @return the provider UUID
   */
  public UUID providerUuid() {
    UUID value = providerUuid;
    if (value == null) {
      value = Digests.providerUuid(key);
      providerUuid = value;
    }
    return value;
  }

  /**
   * 1 on the first claim, incremented by each lease takeover; above 1 means a previous attempt may
   * already have reached the provider.
   *
   * @return the attempt
   */
  public int attempt() {
    return attempt;
  }

  /**
   * Whether this send takes over from an attempt that outlived its lease: the case where the
   * provider may have received the message already.
   *
   * @return {@code true} when {@link #attempt()} is above 1
   */
  public boolean isTakeover() {
    return attempt > 1;
  }

  @Override
  public boolean equals(Object other) {
    return other instanceof SendContext that && key.equals(that.key) && attempt == that.attempt;
  }

  @Override
  public int hashCode() {
    return Objects.hash(key, attempt);
  }

  @Override
  public String toString() {
    return "SendContext[providerKey=" + providerKey() + ", attempt=" + attempt + "]";
  }
}
