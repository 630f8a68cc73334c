package dev.idempotency.spring;

import java.lang.reflect.Method;
import java.util.Collection;
import java.util.Map;
import org.jspecify.annotations.Nullable;
import org.springframework.util.ClassUtils;

/**
 * Whether a key expression's value is a stable key: its text must be the same on every retry of the
 * same call. A value whose class does not override {@code toString()} (so {@code Object}'s identity
 * hash form, {@code OrderShipped@1b2c3d4}, a new key per retry) is not; nor is a collection or map
 * holding one, nor an array. Strings, numbers, UUIDs, enums, records and any class with its own
 * {@code toString()} are. For the starter's integrations; stateless.
 */
public final class KeyValues {

  /** How deep collections of collections are looked into. */
  private static final int MAX_DEPTH = 4;

  private KeyValues() {}

  /**
   * Why a key expression's value is not a stable key, or {@code null} if it is.
   *
   * @param value the value (not null)
   * @return the problem, naming the value's class, or {@code null}
   */
  public static @Nullable String instability(Object value) {
    return instability(value, 0);
  }

  private static @Nullable String instability(@Nullable Object value, int depth) {
    if (value == null || depth > MAX_DEPTH) {
      return null;
    }
    Class<?> type = value.getClass();
    if (type.isArray()) {
      return "an array ("
          + type.getComponentType().getName()
          + "[]), whose toString() is Object.toString (an identity hash such as "
          + Integer.toHexString(System.identityHashCode(value))
          + ", new on every retry)";
    }
    if (value instanceof Collection<?> collection) {
      for (Object element : collection) {
        String problem = instability(element, depth + 1);
        if (problem != null) {
          return "a collection holding " + problem;
        }
      }
      return null;
    }
    if (value instanceof Map<?, ?> map) {
      for (Map.Entry<?, ?> entry : map.entrySet()) {
        String problem = instability(entry.getKey(), depth + 1);
        if (problem == null) {
          problem = instability(entry.getValue(), depth + 1);
        }
        if (problem != null) {
          return "a map holding " + problem;
        }
      }
      return null;
    }
    Method toString = ClassUtils.getMethodIfAvailable(type, "toString");
    if (toString != null && toString.getDeclaringClass() != Object.class) {
      return null;
    }
    return "a "
        + type.getName()
        + ", whose class does not override toString(): the key came from Object.toString (an"
        + " identity hash such as "
        + type.getSimpleName()
        + "@"
        + Integer.toHexString(System.identityHashCode(value))
        + "), new on every retry";
  }
}
