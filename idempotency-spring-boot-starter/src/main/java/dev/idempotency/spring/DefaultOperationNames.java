package dev.idempotency.spring;

import java.lang.reflect.Method;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The default operation names (the class's simple name and the method's, {@code
 * OrderShippedListener.onMessage}) handed out so far by one kind of annotation: two different
 * methods whose default names are equal (the same simple class name in two packages, or overloads)
 * would share one key namespace, so the second is refused when it is found, that is while the
 * application starts. Shared by {@link Idempotent} and {@code @IdempotentListener}; for the
 * starter's integrations; thread-safe.
 */
public final class DefaultOperationNames {

  private final String annotation;
  private final String consequence;
  private final Map<String, Owner> owners = new ConcurrentHashMap<>();

  private record Owner(Method method, Class<?> userClass) {}

  /**
   * Creates an empty registry.
   *
   * @param annotation the annotation, for the message ({@code "@IdempotentListener"})
   * @param consequence what sharing a namespace would do, for the message ({@code "one could return
   *     the other's result"})
   */
  public DefaultOperationNames(String annotation, String consequence) {
    this.annotation = annotation;
    this.consequence = consequence;
  }

  /**
   * Registers the default name of a method; the same method may be registered again.
   *
   * @param name the default name
   * @param method the annotated method
   * @param userClass the class of its bean (not a proxy class)
   * @throws IllegalStateException naming both methods and how to fix it, if another method has the
   *     name
   */
  public void register(String name, Method method, Class<?> userClass) {
    Owner owner = new Owner(method, userClass);
    Owner first = owners.putIfAbsent(name, owner);
    if (first != null && !first.equals(owner)) {
      throw new IllegalStateException(
          annotation
              + " methods "
              + describe(first.method, first.userClass)
              + " and "
              + describe(method, userClass)
              + " have the same default name '"
              + name
              + "', so they would share one key namespace and "
              + consequence
              + "; give each its own "
              + annotation
              + "(name = \"...\")");
    }
  }

  /**
   * A method as messages name it: {@code a.b.Mailer.send(String)}.
   *
   * @param method the method
   * @param userClass the class of its bean
   * @return the description
   */
  public static String describe(Method method, Class<?> userClass) {
    StringBuilder text = new StringBuilder(userClass.getName()).append('.');
    text.append(method.getName()).append('(');
    Class<?>[] types = method.getParameterTypes();
    for (int i = 0; i < types.length; i++) {
      text.append(i > 0 ? ", " : "").append(types[i].getSimpleName());
    }
    return text.append(')').toString();
  }
}
