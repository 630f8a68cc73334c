package dev.idempotency.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.spring.messaging.IdempotentListener;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.FactoryBean;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Lazy;
import org.springframework.core.NestedExceptionUtils;

/**
 * Issue 37 (SPEC 13, 15): a second bean of a class with a default-named {@code @Idempotent} (or
 * {@code @IdempotentListener}) method fails the start, also where Spring cannot tell the bean's
 * class from its definition without creating it. A {@code @Lazy} {@code @Bean} method declared to
 * return an interface tells only the interface until its first use (which used to be where it was
 * refused): the start fails when another bean's class with a default-named method implements that
 * interface, asking for the class as the method's return type. A {@code FactoryBean} that names its
 * object type is checked from that type.
 */
class SecondBeanTypeKnownLaterTest {

  final ApplicationContextRunner runner = DefaultNameClashes.runner();

  public interface Channel {
    String send(String orderId);
  }

  public static class Notifier implements Channel {
    private final String channel;

    public Notifier(String channel) {
      this.channel = channel;
    }

    @Override
    @Idempotent(key = "#orderId")
    public String send(String orderId) {
      return channel + "-receipt-" + orderId;
    }
  }

  /** Its namespace named on purpose: beans of it may share it. */
  public static class NamedNotifier implements Channel {
    @Override
    @Idempotent(name = "order-notice", key = "#orderId")
    public String send(String orderId) {
      return "receipt-" + orderId;
    }
  }

  public static class ChannelListener implements Consumer<String> {
    @Override
    @IdempotentListener(key = "#event")
    public void accept(String event) {}
  }

  @Configuration(proxyBeanMethods = false)
  static class LazySecondDeclaredAsInterface {
    @Bean
    Notifier smsNotifier() {
      return new Notifier("sms");
    }

    @Bean
    @Lazy
    Channel emailNotifier() {
      return new Notifier("email");
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class LazySecondOfANamedClassDeclaredAsInterface {
    @Bean
    NamedNotifier smsNotifier() {
      return new NamedNotifier();
    }

    @Bean
    @Lazy
    Channel emailNotifier() {
      return new NamedNotifier();
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class LazyBeanOfAnotherInterface {
    @Bean
    Notifier smsNotifier() {
      return new Notifier("sms");
    }

    @Bean
    @Lazy
    Runnable cleanup() {
      return () -> {};
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class LazySecondListenerDeclaredAsInterface {
    @Bean
    ChannelListener smsListener() {
      return new ChannelListener();
    }

    @Bean
    @Lazy
    Consumer<String> emailListener() {
      return new ChannelListener();
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class TwoLazyDeclaredAsInterface {
    @Bean
    @Lazy
    Channel smsNotifier() {
      return new Notifier("sms");
    }

    @Bean
    @Lazy
    Channel emailNotifier() {
      return new Notifier("email");
    }
  }

  /** A factory that tells its object's type only once it exists (no generic type). */
  @SuppressWarnings("rawtypes")
  static class NotifierFactory implements FactoryBean {
    @Override
    public Object getObject() {
      return new Notifier("email");
    }

    @Override
    public Class<?> getObjectType() {
      return Notifier.class;
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class SecondFromAFactoryBean {
    @Bean
    Notifier smsNotifier() {
      return new Notifier("sms");
    }

    @Bean
    static NotifierFactory emailNotifier() {
      return new NotifierFactory();
    }
  }

  /** It failed before: the context started, and the lazy bean was refused at its first send. */
  @Test
  void aLazySecondBeanDeclaredAsItsInterfaceFailsTheStart() {
    DefaultNameClashes.assertStartFails(
        runner,
        LazySecondDeclaredAsInterface.class,
        "beans 'smsNotifier' and 'emailNotifier' may both be " + Notifier.class.getName(),
        Notifier.class.getName() + ".send(String)",
        "declared as " + Channel.class.getName(),
        "Declare its @Bean method's return type as the bean's class",
        "@Idempotent(name = ");
  }

  @Test
  void aLazySecondListenerBeanDeclaredAsItsInterfaceFailsTheStart() {
    DefaultNameClashes.assertStartFails(
        runner,
        LazySecondListenerDeclaredAsInterface.class,
        "beans 'smsListener' and 'emailListener' may both be",
        ChannelListener.class.getName() + ".accept(String)",
        "@IdempotentListener(name = ");
  }

  /**
   * The limit: where nothing known at the start is of the declared type, the start cannot tell; the
   * second bean is refused at its first use, never answered with the first one's result.
   */
  @Test
  void twoLazyBeansDeclaredAsTheInterfaceAreRefusedAtTheSecondOnesFirstUse() {
    runner
        .withUserConfiguration(TwoLazyDeclaredAsInterface.class)
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              assertThat(context.getBean("smsNotifier", Channel.class).send("order-1"))
                  .isEqualTo("sms-receipt-order-1");
              assertThatThrownBy(
                      () -> context.getBean("emailNotifier", Channel.class).send("order-1"))
                  .satisfies(
                      refused ->
                          assertThat(NestedExceptionUtils.getMostSpecificCause(refused))
                              .hasMessageContaining("beans 'smsNotifier' and 'emailNotifier'"));
            });
  }

  @Test
  void aLazyBeanOfAnInterfaceNoIdempotentClassImplementsStarts() {
    runner
        .withUserConfiguration(LazyBeanOfAnotherInterface.class)
        .run(context -> assertThat(context).hasNotFailed());
  }

  @Test
  void aLazyBeanDeclaredAsTheInterfaceOfAClassWithNamedMethodsStarts() {
    runner
        .withUserConfiguration(LazySecondOfANamedClassDeclaredAsInterface.class)
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              assertThat(context.getBean("emailNotifier", Channel.class).send("order-1"))
                  .isEqualTo("receipt-order-1");
            });
  }

  @Test
  void aSecondBeanMadeByAFactoryBeanFailsTheStart() {
    DefaultNameClashes.assertStartFails(
        runner, SecondFromAFactoryBean.class, "beans 'smsNotifier' and 'emailNotifier'");
  }
}
