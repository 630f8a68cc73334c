package dev.idempotency.spring.autoconfigure;

import dev.idempotency.IdempotencyGuard;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.HierarchicalBeanFactory;
import org.springframework.beans.factory.ListableBeanFactory;
import org.springframework.beans.factory.ObjectProvider;

/**
 * The guard of a context: the one defined in the closest context of its hierarchy that defines any,
 * itself first, then its parent and so on. A child context that defines a guard of its own (its own
 * lease, say) means its beans to use it; Spring's autowiring would count its parent's guard as a
 * second candidate and refuse both (NoUniqueBeanDefinitionException) unless one is
 * {@code @Primary}, at the first call rather than at the start. Where the closest context defines
 * several guards, Spring's rule decides ({@code @Primary}), as in one context.
 *
 * <p>Looked up at the first {@code get()} and kept: the guard definitions of a context and its
 * ancestors are all registered by the time any bean calls a guard. A lookup that fails (no guard
 * yet) is not kept. Thread-safe: racing first calls resolve the same guard.
 */
final class ClosestGuard implements Supplier<IdempotencyGuard> {

  private final ListableBeanFactory beanFactory;
  private final ObjectProvider<IdempotencyGuard> any;
  private volatile @Nullable IdempotencyGuard resolved;

  private ClosestGuard(ListableBeanFactory beanFactory, ObjectProvider<IdempotencyGuard> any) {
    this.beanFactory = beanFactory;
    this.any = any;
  }

  /**
   * The guard of a context, looked up at the first {@code get()}.
   *
   * @param beanFactory the context's bean factory
   * @param any the context's provider of guards (its whole hierarchy), for several or none
   * @return the supplier
   */
  static Supplier<IdempotencyGuard> of(
      ListableBeanFactory beanFactory, ObjectProvider<IdempotencyGuard> any) {
    return new ClosestGuard(beanFactory, any);
  }

  @Override
  public IdempotencyGuard get() {
    IdempotencyGuard guard = resolved;
    if (guard == null) {
      guard = closest();
      resolved = guard;
    }
    return guard;
  }

  private IdempotencyGuard closest() {
    BeanFactory factory = beanFactory;
    while (factory instanceof ListableBeanFactory listable) {
      String[] names = listable.getBeanNamesForType(IdempotencyGuard.class, true, false);
      if (names.length == 1) {
        return listable.getBean(names[0], IdempotencyGuard.class);
      }
      if (names.length > 1) {
        break; // several in one context: @Primary decides, as Spring's autowiring does
      }
      factory =
          factory instanceof HierarchicalBeanFactory hierarchical
              ? hierarchical.getParentBeanFactory()
              : null;
    }
    return any.getObject();
  }
}
