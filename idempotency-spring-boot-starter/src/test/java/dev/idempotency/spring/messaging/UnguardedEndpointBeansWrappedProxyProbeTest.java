package dev.idempotency.spring.messaging;

import static org.assertj.core.api.Assertions.assertThatCode;

import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.springframework.aop.framework.ProxyFactory;

/**
 * Probe (probeA) of {@link UnguardedEndpointBeans} (the suspicion, low, from the last review): a
 * listener bean that the starter's advisor guards, then wrapped by another post-processor in a
 * proxy that is not Spring's ({@code Advised}): a JDK dynamic proxy. Every delivery still goes
 * through the starter's proxy inside, so refusing it would be a FALSE refusal of a correct
 * application. Rows: the annotation on the class's method (the JDK proxy class carries no
 * annotation) and on the interface's method (the JDK proxy class implements it, and Spring's merged
 * annotation search finds it there). A plain unguarded bean is refused (the control).
 */
class UnguardedEndpointBeansWrappedProxyProbeTest {

  /** A listener interface whose method carries no annotation. */
  public interface Plain {
    void onEvent(String event);
  }

  /** A listener interface whose method carries the annotation. */
  public interface Annotated {
    @IdempotentListener(name = "probeA-annotated-interface", key = "#event")
    void onEvent(String event);
  }

  /** Annotated on the class. */
  public static class ClassAnnotated implements Plain {
    @Override
    @IdempotentListener(name = "probeA-annotated-class", key = "#event")
    public void onEvent(String event) {}
  }

  /** Annotated on the interface only. */
  public static class InterfaceAnnotated implements Annotated {
    @Override
    public void onEvent(String event) {}
  }

  private static IdempotentListenerAdvisor advisor() {
    return new IdempotentListenerAdvisor(
        () -> {
          throw new IllegalStateException("no guard in this probe");
        },
        () -> null,
        () -> Duration.ofHours(1),
        () -> "Idempotency-Key",
        () -> false);
  }

  /** The starter's proxy of {@code target}, as its auto-proxy creator makes it. */
  private static Object guarded(Object target, Class<?> type) {
    ProxyFactory factory = new ProxyFactory(target);
    factory.addInterface(type);
    factory.addAdvisor(advisor());
    return factory.getProxy();
  }

  /** Another post-processor's wrapping: a JDK dynamic proxy that delegates every call. */
  private static Object wrapped(Object inner, Class<?> type) {
    InvocationHandler delegate =
        (proxy, method, args) -> {
          try {
            return method.invoke(inner, args);
          } catch (InvocationTargetException e) {
            throw e.getCause();
          }
        };
    return Proxy.newProxyInstance(
        UnguardedEndpointBeansWrappedProxyProbeTest.class.getClassLoader(),
        new Class<?>[] {type},
        delegate);
  }

  @Test
  void theStartersProxyItselfIsNotRefused() {
    assertThatCode(() -> UnguardedEndpointBeans.refuse(guarded(new ClassAnnotated(), Plain.class)))
        .doesNotThrowAnyException();
    assertThatCode(
            () -> UnguardedEndpointBeans.refuse(guarded(new InterfaceAnnotated(), Annotated.class)))
        .doesNotThrowAnyException();
  }

  @Test
  void aJdkProxyAroundTheStartersProxyIsNotRefusedWhenTheClassIsAnnotated() {
    Object bean = wrapped(guarded(new ClassAnnotated(), Plain.class), Plain.class);
    assertThatCode(() -> UnguardedEndpointBeans.refuse(bean)).doesNotThrowAnyException();
  }

  /**
   * Was an open finding (low, a false refusal at startup; nothing is sent unguarded), fixed: a JDK
   * dynamic proxy that is not Spring's is not refused (its target cannot be seen). The wrapper is
   * not {@code Advised}, so the walk to the starter's proxy stops at once, and the JDK proxy
   * class's {@code onEvent}, whose interface method carries the annotation, is taken for an
   * unguarded listener method. Fails on Boot 3.5 and 4.0: "IllegalStateException: a listener
   * container is being created for a bean of jdk.proxy2.$Proxy194, whose @IdempotentListener method
   * jdk.proxy2.$Proxy194.onEvent(String) no advisor guards ...". With the annotation on the class's
   * method the same wrapper is not refused (the JDK proxy class has no annotation to find): passes.
   */
  @Test
  void aJdkProxyAroundTheStartersProxyIsNotRefusedWhenTheInterfaceIsAnnotated() {
    Object bean = wrapped(guarded(new InterfaceAnnotated(), Annotated.class), Annotated.class);
    assertThatCode(() -> UnguardedEndpointBeans.refuse(bean)).doesNotThrowAnyException();
  }

  @Test
  void anUnguardedBeanIsRefused() {
    org.assertj.core.api.Assertions.assertThatThrownBy(
            () -> UnguardedEndpointBeans.refuse(new ClassAnnotated()))
        .isInstanceOf(IllegalStateException.class);
  }
}
