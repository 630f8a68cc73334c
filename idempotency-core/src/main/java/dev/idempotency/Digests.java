package dev.idempotency;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Base64;
import java.util.UUID;

/** The digests derived from a key: its id at rest, the provider key and the provider UUID. */
final class Digests {

  /** The namespace of {@link #providerUuid}: fixed forever, or provider UUIDs change. */
  private static final UUID PROVIDER_UUID_NAMESPACE =
      UUID.fromString("6f1d3c1e-7b55-4d4a-9a43-0c8e5e1d2b7f");

  private static final Base64.Encoder BASE64URL = Base64.getUrlEncoder().withoutPadding();

  /** Digest instances are not thread-safe and costly to look up: one of each per thread. */
  private static final ThreadLocal<MessageDigest> SHA_256 =
      ThreadLocal.withInitial(() -> digest("SHA-256"));

  private static final ThreadLocal<MessageDigest> SHA_1 =
      ThreadLocal.withInitial(() -> digest("SHA-1"));

  private static MessageDigest digest(String algorithm) {
    try {
      return MessageDigest.getInstance(algorithm);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(algorithm + " is required of every Java platform", e);
    }
  }

  private Digests() {}

  /**
   * The store's key id: base64url of SHA-256 over the key's UTF-8 bytes (domain-separated), 43
   * characters.
   */
  static String keyId(String key) {
    return BASE64URL.encodeToString(sha256("key\0" + key));
  }

  /** The provider idempotency key: 43 characters of {@code [A-Za-z0-9_-]}. */
  static String providerKey(String key) {
    return BASE64URL.encodeToString(sha256("provider\0" + key));
  }

  /** The digest of a request fingerprint, so that stores hold a fixed length. */
  static String fingerprint(String fingerprint) {
    return fingerprint == null ? "" : BASE64URL.encodeToString(sha256("fp\0" + fingerprint));
  }

  /** A name-based UUID (RFC 9562 version 5, SHA-1) of the key in the SDK's namespace. */
  static UUID providerUuid(String key) {
    MessageDigest sha1 = SHA_1.get();
    sha1.reset();
    ByteBuffer namespace = ByteBuffer.allocate(16);
    namespace.putLong(PROVIDER_UUID_NAMESPACE.getMostSignificantBits());
    namespace.putLong(PROVIDER_UUID_NAMESPACE.getLeastSignificantBits());
    sha1.update(namespace.array());
    byte[] hash = sha1.digest(key.getBytes(StandardCharsets.UTF_8));
    hash[6] = (byte) ((hash[6] & 0x0f) | 0x50); // version 5
    hash[8] = (byte) ((hash[8] & 0x3f) | 0x80); // IETF variant
    ByteBuffer bits = ByteBuffer.wrap(hash, 0, 16);
    return new UUID(bits.getLong(), bits.getLong());
  }

  static byte[] sha256(String text) {
    return sha256(text.getBytes(StandardCharsets.UTF_8));
  }

  /** The SHA-256 of {@code bytes}, on this thread's digest. */
  static byte[] sha256(byte[] bytes) {
    MessageDigest sha256 = SHA_256.get();
    sha256.reset();
    return sha256.digest(bytes);
  }

  static String base64url(byte[] bytes) {
    return BASE64URL.encodeToString(bytes);
  }
}
