package dev.idempotency.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.autoconfigure.IdempotencyAutoConfiguration;
import dev.idempotency.spring.autoconfigure.IdempotencyMessagingAutoConfiguration;
import dev.idempotency.spring.messaging.IdempotentListener;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.core.convert.ConversionService;
import org.springframework.core.convert.converter.Converter;
import org.springframework.core.convert.support.DefaultConversionService;

/**
 * Probe (probeI, of fixexpr d756130b): does a key's argument conversion use the application's own
 * {@link Converter} (registered in its {@code conversionService} bean, the bean factory's)? The
 * starter evaluates keys with a {@code StandardEvaluationContext} of its own, whose type converter
 * is Spring's shared {@link DefaultConversionService}: the application's converter is never called,
 * so its transient failure cannot be taken for the input's, and a type that only it can convert is
 * an invalid key at every call, the same every time (on a listener a poison message at the first
 * delivery, never a send that sometimes happens). Held on Boot 3.5 and 4.0.
 */
class ApplicationConverterKeyProbeTest {

  /** A customer: no valueOf, of, from nor String constructor; only the application converts it. */
  public static final class Customer {
    final String id;

    Customer(String id) {
      this.id = id;
    }
  }

  /** The application's converter: a look-up that fails once, then works. */
  static final class CustomerConverter implements Converter<String, Customer> {
    static final AtomicInteger calls = new AtomicInteger();

    @Override
    public Customer convert(String id) {
      if (calls.incrementAndGet() == 1) {
        throw new IllegalStateException("the customer look-up timed out (transient)");
      }
      return new Customer(id);
    }
  }

  /** The application's key helper. */
  public static final class Keys {
    private Keys() {}

    /** The key of a customer's notice. */
    public static String of(Customer customer) {
      return "notice-" + customer.id;
    }
  }

  static final String KEY =
      "T(dev.idempotency.spring.ApplicationConverterKeyProbeTest$Keys).of(#id)";

  /** The notifier: each call that runs is a send. */
  public static class Notifier {
    final AtomicInteger sends = new AtomicInteger();

    @Idempotent(name = "app-converted", key = KEY)
    public String send(String id) {
      return "sent-" + sends.incrementAndGet();
    }
  }

  /** The listener: each delivery that runs is a send. */
  public static class Listener {
    final AtomicInteger sends = new AtomicInteger();

    @IdempotentListener(name = "app-converted-listener", key = KEY)
    public void onMessage(String id) {
      sends.incrementAndGet();
    }

    /** The sends so far (a method: the bean is a proxy). */
    public int sends() {
      return sends.get();
    }
  }

  @Test
  void theApplicationsConverterIsNotTheKeysAndTheKeyFailsTheSameAtEveryCall() {
    CustomerConverter.calls.set(0);
    List<String> results = new ArrayList<>();
    new ApplicationContextRunner()
        .withConfiguration(
            AutoConfigurations.of(
                dev.idempotency.spring.autoconfigure.JacksonAutoConfigurations.jackson(),
                IdempotencyAutoConfiguration.class,
                IdempotencyMessagingAutoConfiguration.class))
        .withPropertyValues("idempotency.store=memory")
        .withBean(
            "conversionService",
            ConversionService.class,
            () -> {
              DefaultConversionService service = new DefaultConversionService();
              service.addConverter(String.class, Customer.class, new CustomerConverter());
              return service;
            })
        .withBean(Notifier.class)
        .withBean(Listener.class)
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              Notifier notifier = context.getBean(Notifier.class);
              Listener listener = context.getBean(Listener.class);
              String id = UUID.randomUUID().toString();
              for (int attempt = 1; attempt <= 2; attempt++) {
                results.add(call("method", () -> notifier.send(id)));
              }
              for (int attempt = 1; attempt <= 2; attempt++) {
                results.add(
                    call(
                        "listener",
                        () -> {
                          listener.onMessage(id);
                          return "sent-" + listener.sends();
                        }));
              }
            });

    assertThat(CustomerConverter.calls).as("the application's converter's calls").hasValue(0);
    assertThat(results)
        .as("a key only the application's converter could convert")
        .containsExactly(
            "method: threw InvalidKeyException",
            "method: threw InvalidKeyException",
            "listener: threw InvalidIdempotencyKeyException",
            "listener: threw InvalidIdempotencyKeyException");
  }

  private static String call(String what, Supplier<String> send) {
    try {
      return what + ": " + send.get();
    } catch (RuntimeException e) {
      return what + ": threw " + e.getClass().getSimpleName();
    }
  }
}
