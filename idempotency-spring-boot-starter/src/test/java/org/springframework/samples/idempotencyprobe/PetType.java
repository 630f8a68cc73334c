package org.springframework.samples.idempotencyprobe;

import java.util.concurrent.atomic.AtomicInteger;

/**
 * Probe (probeL, of a238b7d0): a type of an application whose package starts with {@code
 * org.springframework.} (Spring's own sample applications, PetClinic among them, live under {@code
 * org.springframework.samples}), converted from a String by its own static {@code valueOf}: a
 * look-up that fails as many times as {@link #failures} says (it timed out), then works.
 */
public final class PetType {
  /** How many look-ups fail before one works. */
  public static final AtomicInteger failures = new AtomicInteger();

  private final String name;

  private PetType(String name) {
    this.name = name;
  }

  /**
   * The look-up the conversion service calls for a String argument.
   *
   * @param name the pet type's name
   * @return the pet type
   */
  public static PetType valueOf(String name) {
    if (failures.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
      throw new IllegalStateException("the pet type look-up timed out (transient)");
    }
    return new PetType(name);
  }

  /**
   * The key of a pet type's notice.
   *
   * @param type the pet type, converted from the key's String argument
   * @return the key
   */
  public static String keyOf(PetType type) {
    return "pet-" + type.name;
  }
}
