package dev.idempotency.spring;

import dev.idempotency.IdempotencyKey;
import java.lang.reflect.Method;

/**
 * The {@code name} attribute of {@link Idempotent} and {@link
 * dev.idempotency.spring.messaging.IdempotentListener}: the operation name that namespaces the
 * method's keys and tags its metrics, by default the class's simple name and the method's ({@code
 * Mailer.send}), checked when the application starts. For the starter's integrations; stateless.
 */
public final class NameAttribute {

  private NameAttribute() {}

  /**
   * The operation name of an annotated method.
   *
   * @param where the annotated method, for the message ({@code "@Idempotent on a.B.send(..)"})
   * @param text the attribute, empty for the default
   * @param userClass the method's class as the application declared it (not a proxy's)
   * @param method the method
   * @return the name
   * @throws IllegalStateException naming the method, if the name is not 1 to 64 characters of
   *     {@code [A-Za-z0-9_.-]}
   */
  public static String of(String where, String text, Class<?> userClass, Method method) {
    String name = text.isEmpty() ? userClass.getSimpleName() + "." + method.getName() : text;
    if (!IdempotencyKey.isOperationName(name)) {
      throw new IdempotencyConfigurationException(
          where + ": the name '" + name + "' must be 1 to 64 characters of [A-Za-z0-9_.-].",
          "Set name = \"...\" to such a name.");
    }
    return name;
  }
}
