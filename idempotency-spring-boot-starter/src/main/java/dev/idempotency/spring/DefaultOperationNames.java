package dev.idempotency.spring;

import java.lang.annotation.Annotation;
import java.lang.reflect.Method;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.BiConsumer;
import java.util.function.Predicate;
import java.util.stream.Collectors;
import org.jspecify.annotations.Nullable;
import org.springframework.aop.framework.AopProxyUtils;
import org.springframework.aop.scope.ScopedProxyUtils;
import org.springframework.aop.support.AopUtils;
import org.springframework.beans.BeansException;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;
import org.springframework.beans.factory.support.DefaultListableBeanFactory;
import org.springframework.beans.factory.support.DefaultSingletonBeanRegistry;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.core.annotation.AnnotationUtils;
import org.springframework.util.ClassUtils;
import org.springframework.util.ObjectUtils;
import org.springframework.util.ReflectionUtils;

/**
 * The default operation names (the class's simple name and the method's, {@code
 * OrderShippedListener.onMessage}) handed out so far: two different methods whose default names are
 * equal (the same simple class name in two packages, or overloads) would share one key namespace,
 * so the second is refused when it is found, that is while the application starts. One registry per
 * hierarchy of contexts, {@link #sharedIn}, serves {@link Idempotent} and
 * {@code @IdempotentListener} together, each through its {@link #forAnnotation view}, so that an
 * {@code @Idempotent} method and a listener never share a namespace either.
 *
 * <p>A default name belongs to a class, not to a bean: two beans of one class (one notifier per
 * channel) would share it, so the second bean is refused too ({@link #registerBean}), at startup
 * even when it is created later ({@code @Lazy}): {@link #registerBeanDefinitions} reads the classes
 * of the bean definitions without creating a bean. Putting the bean's name into the default name
 * instead would silently move a bean's keys to a new namespace whenever the bean is renamed, or a
 * second bean of its class is added (every key in the window sent again); a name given on the
 * annotation says that its beans share one namespace on purpose. For the starter's integrations;
 * thread-safe.
 */
public final class DefaultOperationNames {

  /** The name of the application's shared registry among its singletons. */
  public static final String BEAN_NAME = "dev.idempotency.spring.defaultOperationNames";

  private final String annotation;
  private final String consequence;
  private final Scope scope;
  private final Map<String, Owner> owners;
  private final Map<String, BeanOwner> beans;

  private record Owner(String annotation, Method method, Class<?> userClass) {}

  /** The context whose beans a view registers: compared by identity, named for messages. */
  private record Scope(Object beanFactory, String name) {
    boolean is(Scope other) {
      return beanFactory == other.beanFactory;
    }
  }

  private record BeanOwner(Scope scope, String bean) {}

  /**
   * Creates an empty registry.
   *
   * @param annotation the annotation, for the message ({@code "@IdempotentListener"})
   * @param consequence what sharing a namespace would do, for the message ({@code "one could return
   *     the other's result"})
   */
  public DefaultOperationNames(String annotation, String consequence) {
    this(
        annotation,
        consequence,
        new Scope(new Object(), "the application"),
        new ConcurrentHashMap<>(),
        new ConcurrentHashMap<>());
  }

  private DefaultOperationNames(
      String annotation,
      String consequence,
      Scope scope,
      Map<String, Owner> owners,
      Map<String, BeanOwner> beans) {
    this.annotation = Objects.requireNonNull(annotation, "annotation must not be null");
    this.consequence = Objects.requireNonNull(consequence, "consequence must not be null");
    this.scope = scope;
    this.owners = owners;
    this.beans = beans;
  }

  /**
   * The registry of a context's whole hierarchy, created on first use, kept at its root context's
   * singletons ({@value #BEAN_NAME}) and seen from each context through a view of its own, so that
   * every kind of annotated method, in every context of the hierarchy, registers in one. Contexts
   * of one hierarchy share its guards' stores as often as not (a child on its parent's guard, a
   * child with a guard of its own over the parent's store, sibling children on their parent's
   * guard), and a store's records are keyed by name alone: a child's {@code Mailer.send} and its
   * parent's, or two siblings' beans of one class, would share one key namespace. So a default name
   * is unique in the whole hierarchy, whether or not the contexts' guards share a store (the
   * starter cannot always tell: a guard is the application's own), and a second bean of a class
   * with a default-named method is refused in a sibling or a parent as in one context. A bean is
   * released when its context closes, so that a child closed and built again (a refreshed named
   * context) registers its beans again; a default name is kept, since the records a closed child
   * left in the store keep their namespace until their window ends.
   *
   * @param beanFactory the context's bean factory
   * @return its view of its hierarchy's registry
   */
  public static DefaultOperationNames sharedIn(ConfigurableListableBeanFactory beanFactory) {
    ConfigurableListableBeanFactory root = beanFactory;
    while (root.getParentBeanFactory() instanceof ConfigurableListableBeanFactory parent) {
      root = parent;
    }
    DefaultOperationNames shared = viewIn(root, null);
    return root == beanFactory ? shared : viewIn(beanFactory, shared);
  }

  /** A context's view, kept among its singletons; on {@code shared}'s names unless the root. */
  private static DefaultOperationNames viewIn(
      ConfigurableListableBeanFactory beanFactory, @Nullable DefaultOperationNames shared) {
    synchronized (beanFactory.getSingletonMutex()) {
      if (beanFactory.getSingleton(BEAN_NAME) instanceof DefaultOperationNames view) {
        return view;
      }
      String id =
          beanFactory instanceof DefaultListableBeanFactory listable
                  && listable.getSerializationId() != null
              ? listable.getSerializationId()
              : ObjectUtils.identityToString(beanFactory);
      Scope scope = new Scope(beanFactory, "the context '" + id + "'");
      DefaultOperationNames created =
          shared == null
              ? new DefaultOperationNames(
                  "an idempotent method",
                  "one could be answered with the other's result",
                  scope,
                  new ConcurrentHashMap<>(),
                  new ConcurrentHashMap<>())
              : new DefaultOperationNames(
                  shared.annotation, shared.consequence, scope, shared.owners, shared.beans);
      beanFactory.registerSingleton(BEAN_NAME, created);
      if (shared != null && beanFactory instanceof DefaultSingletonBeanRegistry registry) {
        // a manually registered singleton is not destroyed with its context: release its beans
        registry.registerDisposableBean(
            BEAN_NAME + ".release", () -> created.beans.values().removeIf(created::registeredHere));
      }
      return created;
    }
  }

  private boolean registeredHere(BeanOwner owner) {
    return owner.scope.is(scope);
  }

  /**
   * This registry's names, registered for another annotation: a view that shares them.
   *
   * @param annotation the annotation, for the message ({@code "@IdempotentListener"})
   * @param consequence what sharing a namespace would do, for the message
   * @return the view
   */
  public DefaultOperationNames forAnnotation(String annotation, String consequence) {
    return new DefaultOperationNames(annotation, consequence, scope, owners, beans);
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
    throw new IdempotencyConfigurationException(
        methods
            + " have the same default name '"
            + name
            + "', so they would share one key namespace and "
            + consequence
            + ".",
        "Give each its own " + fix + ".");
  }

  /**
   * Registers a bean of a class with annotated methods, as it is proxied at startup (its name is
   * Spring AOP's {@code ProxyCreationContext.getCurrentProxiedBeanName()}); the same bean may be
   * registered again. A second bean of the class is refused if any of the class's annotated methods
   * has a default name.
   *
   * @param beanName the bean's name, or null when no bean is being proxied (nothing is registered)
   * @param userClass the class of the bean (not a proxy class)
   * @param defaultNamed whether a method of the class is annotated and has a default name
   * @throws IllegalStateException naming both beans, the methods and how to fix it
   */
  public void registerBean(
      @Nullable String beanName, Class<?> userClass, Predicate<Method> defaultNamed) {
    if (beanName == null) {
      return;
    }
    String bean =
        ScopedProxyUtils.isScopedTarget(beanName)
            ? ScopedProxyUtils.getOriginalBeanName(beanName)
            : beanName;
    BeanOwner owner = new BeanOwner(scope, bean);
    BeanOwner firstOwner = beans.putIfAbsent(annotation + " " + userClass.getName(), owner);
    if (firstOwner == null || (registeredHere(firstOwner) && firstOwner.bean.equals(bean))) {
      return;
    }
    List<Method> methods =
        Arrays.stream(
                ReflectionUtils.getUniqueDeclaredMethods(
                    userClass, ReflectionUtils.USER_DECLARED_METHODS))
            .filter(defaultNamed)
            .toList();
    if (methods.isEmpty()) {
      return; // every annotated method names its namespace: shared by both beans on purpose
    }
    StringBuilder named = new StringBuilder();
    for (Method method : methods) {
      named.append(named.length() > 0 ? ", " : "");
      named.append(describe(method, userClass)).append(" (default name '");
      named.append(userClass.getSimpleName()).append('.').append(method.getName()).append("')");
    }
    boolean sameContext = registeredHere(firstOwner);
    String both =
        sameContext
            ? "'" + firstOwner.bean + "' and '" + bean + "'"
            : "'"
                + firstOwner.bean
                + "' (of "
                + firstOwner.scope.name
                + ") and '"
                + bean
                + "' (of "
                + scope.name
                + ", in the same hierarchy of contexts)";
    throw new IdempotencyConfigurationException(
        "beans "
            + both
            + " are both "
            + userClass.getName()
            + ", whose "
            + annotation
            + (methods.size() == 1 ? " method " : " methods ")
            + named
            + " would give both beans one key namespace, so "
            + consequence
            + ". A default name is the class's, not the bean's (so that renaming a bean never"
            + " changes its keys).",
        "Give each bean its own class (a subclass is enough), or set "
            + annotation
            + "(name = \"...\") if the beans are meant to share one namespace, and put what tells"
            + " them apart in the key");
  }

  /**
   * Registers, from the application's bean definitions and without creating a bean, every bean
   * whose class has a method with {@code annotation}: so that a second bean of such a class is
   * refused when the application starts even if it is created only later ({@code @Lazy}, a
   * prototype), not at its first use. A bean registered after the start is still checked when it is
   * proxied ({@link #registerBean}). The class is the one the definition predicts ({@code
   * BeanFactory.getType(name, false)}, no factory bean initialised). For a bean not created yet
   * whose definition predicts only a supertype (a {@code @Bean} method declared to return an
   * interface), the class is known only once it is created, which a {@code @Lazy} bean must not be
   * at the start: if another bean's class with a default-named method is of that supertype, the
   * start fails, since the two beans may share one key namespace, and the message asks for the
   * {@code @Bean} method's return type to be the bean's class.
   *
   * @param beanFactory the application's bean factory
   * @param annotation the annotation of the methods looked for
   * @param register called with each such bean's name and class (its {@code registerBean})
   * @throws IllegalStateException if {@code register} refuses a bean, or a bean not created yet is
   *     declared as a supertype of another bean's class with a default-named method
   */
  public static void registerBeanDefinitions(
      ConfigurableListableBeanFactory beanFactory,
      Class<? extends Annotation> annotation,
      BiConsumer<String, Class<?>> register) {
    Map<String, Class<?>> annotated = new LinkedHashMap<>();
    Map<String, Class<?>> declaredOnly = new LinkedHashMap<>();
    for (String name : beanFactory.getBeanDefinitionNames()) {
      Class<?> type;
      try {
        if (beanFactory.getBeanDefinition(name).isAbstract()) {
          continue;
        }
        type = beanFactory.getType(name, false);
      } catch (BeansException | LinkageError unpredictable) {
        continue; // its class cannot be told without creating it: checked when it is proxied
      }
      if (type == null) {
        continue;
      }
      Class<?> userClass = ClassUtils.getUserClass(type);
      Object created = beanFactory.getSingleton(name);
      if (created != null && AopUtils.isAopProxy(created)) {
        userClass = AopProxyUtils.ultimateTargetClass(created); // an interface-based proxy
      }
      if (hasAnnotatedMethod(userClass, annotation)) {
        register.accept(name, userClass);
        annotated.put(originalName(name), userClass);
      } else if (!beanFactory.containsSingleton(name)) {
        declaredOnly.put(originalName(name), userClass); // its class is known once it is created
      }
    }
    declaredOnly.forEach(
        (bean, declared) ->
            annotated.forEach(
                (other, userClass) -> {
                  if (!other.equals(bean) && declared.isAssignableFrom(userClass)) {
                    refuseMaybeSecond(other, bean, declared, userClass, annotation);
                  }
                }));
  }

  /** A bean not created yet, declared as a supertype of another's class with a default name. */
  private static void refuseMaybeSecond(
      String first,
      String bean,
      Class<?> declared,
      Class<?> userClass,
      Class<? extends Annotation> annotation) {
    String defaultNamed =
        Arrays.stream(
                ReflectionUtils.getUniqueDeclaredMethods(
                    userClass, ReflectionUtils.USER_DECLARED_METHODS))
            .filter(method -> hasDefaultName(method, annotation))
            .map(method -> describe(method, userClass))
            .collect(Collectors.joining(", "));
    if (defaultNamed.isEmpty()) {
      return; // every annotated method names its namespace: shared by beans on purpose
    }
    String annotationName = "@" + annotation.getSimpleName();
    throw new IdempotencyConfigurationException(
        "beans '"
            + first
            + "' and '"
            + bean
            + "' may both be "
            + userClass.getName()
            + ", whose "
            + annotationName
            + " "
            + defaultNamed
            + " has a default name, the class's: both beans would then share one key namespace."
            + " Bean '"
            + bean
            + "' is not created at startup (@Lazy, or not a singleton) and its definition is"
            + " declared as "
            + declared.getName()
            + ", so its class is known only when it is first used.",
        "Declare its @Bean method's"
            + " return type as the bean's class (Spring's advice for @Bean methods), so that the"
            + " start can check it; give each bean its own class; or set "
            + annotationName
            + "(name = \"...\") if the beans are meant to share one namespace");
  }

  private static String originalName(String beanName) {
    return ScopedProxyUtils.isScopedTarget(beanName)
        ? ScopedProxyUtils.getOriginalBeanName(beanName)
        : beanName;
  }

  private static boolean hasDefaultName(Method method, Class<? extends Annotation> annotation) {
    Annotation found = AnnotatedElementUtils.findMergedAnnotation(method, annotation);
    return found != null && "".equals(AnnotationUtils.getValue(found, "name"));
  }

  private static boolean hasAnnotatedMethod(
      Class<?> userClass, Class<? extends Annotation> annotation) {
    if (!AnnotationUtils.isCandidateClass(userClass, annotation)) {
      return false;
    }
    return Arrays.stream(
            ReflectionUtils.getUniqueDeclaredMethods(
                userClass, ReflectionUtils.USER_DECLARED_METHODS))
        .anyMatch(method -> AnnotatedElementUtils.hasAnnotation(method, annotation));
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
