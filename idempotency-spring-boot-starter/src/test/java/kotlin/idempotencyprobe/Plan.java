package kotlin.idempotencyprobe;

import java.util.concurrent.atomic.AtomicInteger;

/**
 * Probe (probeL, of a238b7d0): a type in a package starting with {@code kotlin.} (compiled from
 * Java; as a Kotlin application's classes could be named), converted from a String by its own
 * static {@code valueOf}: a look-up that fails as many times as {@link #failures} says, then works.
 */
public final class Plan {
  /** How many look-ups fail before one works. */
  public static final AtomicInteger failures = new AtomicInteger();

  private final String name;

  private Plan(String name) {
    this.name = name;
  }

  /**
   * The look-up the conversion service calls for a String argument.
   *
   * @param name the plan's name
   * @return the plan
   */
  public static Plan valueOf(String name) {
    if (failures.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
      throw new IllegalStateException("the plan look-up timed out (transient)");
    }
    return new Plan(name);
  }

  /**
   * The key of a plan's notice.
   *
   * @param plan the plan, converted from the key's String argument
   * @return the key
   */
  public static String keyOf(Plan plan) {
    return "plan-" + plan.name;
  }
}
