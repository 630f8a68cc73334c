package dev.idempotency.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.spring.messaging.IdempotentListener;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Lazy;
import org.springframework.context.support.GenericApplicationContext;

/**
 * Issue 37 (SPEC 13, 15): two beans of one class (one notifier per channel) have one default name
 * per annotated method, so they would share one key namespace: the e-mail for an order would be
 * answered with the SMS's stored receipt and never sent. The start fails naming both beans; a name
 * given on the annotation says the namespace is shared on purpose, and the key can then tell the
 * beans apart.
 */
class TwoBeansOfOneClassTest {

  static final List<String> SENT = new CopyOnWriteArrayList<>();

  final ApplicationContextRunner runner = DefaultNameClashes.runner();

  static class Notifier {
    private final String channel;

    Notifier(String channel) {
      this.channel = channel;
    }

    @Idempotent(key = "#orderId")
    public String send(String orderId) {
      SENT.add(channel + ":" + orderId);
      return channel + "-receipt-" + orderId;
    }
  }

  /** The namespace named on purpose, and the bean (the key's root object) in the key. */
  static class NamedNotifier {
    private final String channel;

    NamedNotifier(String channel) {
      this.channel = channel;
    }

    public String getChannel() {
      return channel;
    }

    @Idempotent(name = "order-notice", key = "channel + ':' + #orderId")
    public String send(String orderId) {
      SENT.add(channel + ":" + orderId);
      return channel + "-receipt-" + orderId;
    }
  }

  /** A class with a named method first and a default-named one after it. */
  static class TwoMethods {
    @Idempotent(name = "first-notice", key = "#orderId")
    public String first(String orderId) {
      return orderId;
    }

    @Idempotent(key = "#orderId")
    public String second(String orderId) {
      return orderId;
    }
  }

  static class ChannelListener {
    @IdempotentListener(key = "#event")
    public void onEvent(String event) {}
  }

  @Configuration(proxyBeanMethods = false)
  static class TwoChannels {
    @Bean
    Notifier smsNotifier() {
      return new Notifier("sms");
    }

    @Bean
    Notifier emailNotifier() {
      return new Notifier("email");
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class TwoNamedChannels {
    @Bean
    NamedNotifier smsNotifier() {
      return new NamedNotifier("sms");
    }

    @Bean
    NamedNotifier emailNotifier() {
      return new NamedNotifier("email");
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class TwoBeansOfTwoMethods {
    @Bean
    TwoMethods firstBean() {
      return new TwoMethods();
    }

    @Bean
    TwoMethods secondBean() {
      return new TwoMethods();
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class TwoListeners {
    @Bean
    ChannelListener smsListener() {
      return new ChannelListener();
    }

    @Bean
    ChannelListener emailListener() {
      return new ChannelListener();
    }
  }

  /** The second bean {@code @Lazy}: created at its first use, long after the start. */
  @Configuration(proxyBeanMethods = false)
  static class OneChannelLazy {
    @Bean
    Notifier smsNotifier() {
      return new Notifier("sms");
    }

    @Bean
    @Lazy
    Notifier emailNotifier() {
      return new Notifier("email");
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class OneListenerLazy {
    @Bean
    ChannelListener smsListener() {
      return new ChannelListener();
    }

    @Bean
    @Lazy
    ChannelListener emailListener() {
      return new ChannelListener();
    }
  }

  /**
   * Issue 37: the second bean {@code @Lazy} was refused only at its first use (the first send of
   * the running application failed), not at the start: the bean definitions' classes are checked
   * when the application starts, without creating the lazy bean.
   */
  @Test
  void aLazySecondBeanOfOneClassFailsTheStartNamingBothBeans() {
    DefaultNameClashes.assertStartFails(
        runner,
        OneChannelLazy.class,
        "beans 'smsNotifier' and 'emailNotifier'",
        Notifier.class.getName() + ".send(String)",
        "default name 'Notifier.send'");
  }

  @Test
  void aLazySecondListenerBeanOfOneClassFailsTheStartNamingBothBeans() {
    DefaultNameClashes.assertStartFails(
        runner,
        OneListenerLazy.class,
        "beans 'smsListener' and 'emailListener'",
        ChannelListener.class.getName() + ".onEvent(String)",
        "default name 'ChannelListener.onEvent'");
  }

  /** A bean registered after the start is refused when it is created: the fallback. */
  @Test
  void aSecondBeanRegisteredAfterTheStartIsRefusedWhenItIsCreated() {
    runner
        .withBean("smsNotifier", Notifier.class, () -> new Notifier("sms"))
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              GenericApplicationContext running =
                  (GenericApplicationContext) context.getSourceApplicationContext();
              running.registerBean("emailNotifier", Notifier.class, () -> new Notifier("email"));

              assertThatThrownBy(() -> running.getBean("emailNotifier"))
                  .rootCause()
                  .hasMessageContaining("beans 'smsNotifier' and 'emailNotifier'");
            });
  }

  @Test
  void twoBeansOfOneClassFailTheStartNamingBothBeans() {
    runner
        .withUserConfiguration(TwoChannels.class)
        .run(
            context -> {
              assertThat(context).hasFailed();
              assertThat(context.getStartupFailure())
                  .rootCause()
                  .hasMessageContainingAll(
                      "beans 'smsNotifier' and 'emailNotifier'",
                      Notifier.class.getName() + ".send(String)",
                      "default name 'Notifier.send'",
                      "@Idempotent(name = ");
            });
  }

  @Test
  void aDefaultNamedMethodAfterANamedOneIsFoundToo() {
    runner
        .withUserConfiguration(TwoBeansOfTwoMethods.class)
        .run(
            context -> {
              assertThat(context).hasFailed();
              assertThat(context.getStartupFailure())
                  .rootCause()
                  .hasMessageContainingAll(
                      "beans 'firstBean' and 'secondBean'",
                      TwoMethods.class.getName() + ".second(String)");
              assertThat(context.getStartupFailure().getMessage()).doesNotContain(".first(String)");
            });
  }

  @Test
  void aNamedMethodSharesItsNamespaceOnPurposeAndItsKeyTellsTheBeansApart() {
    runner
        .withUserConfiguration(TwoNamedChannels.class)
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              SENT.clear();
              NamedNotifier sms = context.getBean("smsNotifier", NamedNotifier.class);
              NamedNotifier email = context.getBean("emailNotifier", NamedNotifier.class);
              assertThat(sms.send("order-1")).isEqualTo("sms-receipt-order-1");
              assertThat(email.send("order-1")).isEqualTo("email-receipt-order-1");
              assertThat(email.send("order-1")).isEqualTo("email-receipt-order-1");
              assertThat(SENT).containsExactlyInAnyOrder("sms:order-1", "email:order-1");
            });
  }

  @Test
  void oneBeanOfAClassStarts() {
    runner
        .withBean("smsNotifier", Notifier.class, () -> new Notifier("sms"))
        .run(context -> assertThat(context).hasNotFailed());
  }

  @Test
  void twoListenerBeansOfOneClassFailTheStartNamingBothBeans() {
    runner
        .withUserConfiguration(TwoListeners.class)
        .run(
            context -> {
              assertThat(context).hasFailed();
              assertThat(context.getStartupFailure())
                  .rootCause()
                  .hasMessageContainingAll(
                      "beans 'smsListener' and 'emailListener'",
                      ChannelListener.class.getName() + ".onEvent(String)",
                      "default name 'ChannelListener.onEvent'",
                      "@IdempotentListener(name = ");
            });
  }
}
