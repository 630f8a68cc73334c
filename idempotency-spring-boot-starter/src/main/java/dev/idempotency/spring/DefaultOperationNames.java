package dev.idempotency.spring;

import java.lang.reflect.Method;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;

/**
 * The default operation names (the class's simple name and the method's, {@code
 * OrderShippedListener.onMessage}) handed out so far: two different methods whose default names are
 * equal (the same simple class name in two packages, or overloads) would share one key namespace,
 * so the second is refused when it is found, that is while the application starts. One registry per
 * application, {@link #sharedIn}, serves {@link Idempotent} and {@code @IdempotentListener}
 * together, each through its {@link #forAnnotation view}, so that an {@code @Idempotent} method and
 * a listener never share a namespace either. For the starter's integrations; thread-safe.
 */
public final class DefaultOperationNames {

  /** The name of the application's shared registry among its singletons. */
  public static final String BEAN_NAME = "dev.idempotency.spring.defaultOperationNames";

  private final String annotation;
  private final String consequence;
  private final Map<String, Owner> owners;

  private record Owner(String annotation, Method method, Class<?> userClass) {}

  /**
   * Creates an empty registry.
   *
   * @param annotation the annotation, for the message ({@code "@IdempotentListener"})
   * @param consequence what sharing a namespace would do, for the message ({@code "one could return
   *     the other's result"})
   */
  public DefaultOperationNames(String annotation, String consequence) {
    this(annotation, consequence, new ConcurrentHashMap<>());
  }

  private DefaultOperationNames(String annotation, String consequence, Map<String, Owner> owners) {
    this.annotation = Objects.requireNonNull(annotation, "annotation must not be null");
    this.consequence = Objects.requireNonNull(consequence, "consequence must not be null");
    this.owners = owners;
  }

  /**
   * The registry of an application, created on first use and kept among its singletons ({@value
   * #BEAN_NAME}), so that every kind of annotated method registers in one.
   *
   * @param beanFactory the application's bean factory
   * @return its registry
   */
  public static DefaultOperationNames sharedIn(ConfigurableListableBeanFactory beanFactory) {
    synchronized (beanFactory.getSingletonMutex()) {
      if (beanFactory.getSingleton(BEAN_NAME) instanceof DefaultOperationNames shared) {
        return shared;
      }
      DefaultOperationNames created =
          new DefaultOperationNames(
              "an idempotent method", "one could be answered with the other's result");
      beanFactory.registerSingleton(BEAN_NAME, created);
      return created;
    }
  }

  /**
   * This registry's names, registered for another annotation: a view that shares them.
   *
   * @param annotation the annotation, for the message ({@code "@IdempotentListener"})
   * @param consequence what sharing a namespace would do, for the message
   * @return the view
   */
  public DefaultOperationNames forAnnotation(String annotation, String consequence) {
    return new DefaultOperationNames(annotation, consequence, owners);
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
    Owner owner = new Owner(annotation, method, userClass);
    Owner first = owners.putIfAbsent(name, owner);
    if (first == null || (first.method.equals(method) && first.userClass.equals(userClass))) {
      return;
    }
    boolean sameKind = first.annotation.equals(annotation);
    String methods =
        sameKind
            ? annotation
                + " methods "
                + describe(first.method, first.userClass)
                + " and "
                + describe(method, userClass)
            : first.annotation
                + " method "
                + describe(first.method, first.userClass)
                + " and "
                + annotation
                + " method "
                + describe(method, userClass);
    String fix =
        sameKind
            ? annotation + "(name = \"...\")"
            : "name (" + first.annotation + "(name = \"...\"), " + annotation + "(name = \"...\"))";
    throw new IllegalStateException(
        methods
            + " have the same default name '"
            + name
            + "', so they would share one key namespace and "
            + consequence
            + "; give each its own "
            + fix);
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
