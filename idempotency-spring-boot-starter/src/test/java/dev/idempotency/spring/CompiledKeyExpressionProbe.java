package dev.idempotency.spring;

import dev.idempotency.spring.autoconfigure.IdempotencyAutoConfiguration;
import dev.idempotency.spring.autoconfigure.IdempotencyMessagingAutoConfiguration;
import dev.idempotency.spring.messaging.IdempotentListener;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

/**
 * The application that {@link CompiledKeyExpressionProbeTest} starts in its own JVM, so that the
 * JVM-wide {@code spring.expression.compiler.mode} it is given applies to the starter's parsers
 * (SpEL reads it once, when its configuration class loads). An {@code @Idempotent} bean keyed by a
 * getter ({@code #order.ref}) and by a static look-up ({@code T(..Keys).of(#p0)}), each of which
 * fails once for a "flaky" argument, as a look-up that timed out does. Each key is evaluated twice
 * first, so that SpEL compiles it (IMMEDIATE compiles after the second evaluation), then with the
 * flaky argument, then again. The same for an {@code @IdempotentListener} keyed by the getter,
 * called as a broker's container calls it (no broker: a direct call is a record delivery). Prints
 * one {@code RESULT} line per call.
 */
public final class CompiledKeyExpressionProbe {

  private CompiledKeyExpressionProbe() {}

  /** An order whose reference look-up fails once for an id holding "flaky". */
  public record Order(String id) {
    static final Set<String> failedOnce = ConcurrentHashMap.newKeySet();

    public String getRef() {
      if (id.contains("flaky") && failedOnce.add(id)) {
        throw new IllegalStateException("the look-up timed out (transient)");
      }
      return "ref-" + id;
    }
  }

  /** A key look-up that fails once for a payload holding "flaky". */
  public static final class Keys {
    static final Set<String> failedOnce = ConcurrentHashMap.newKeySet();

    private Keys() {}

    public static String of(String payload) {
      if (payload.contains("flaky") && failedOnce.add(payload)) {
        throw new IllegalStateException("the look-up timed out (transient)");
      }
      return "key-" + payload;
    }
  }

  /** The notifier: each call that runs is a send. */
  public static class Notifier {
    final AtomicInteger sends = new AtomicInteger();

    @Idempotent(name = "compiled-getter", key = "#order.ref")
    public String sendOrder(Order order) {
      return "sent-" + sends.incrementAndGet();
    }

    @Idempotent(name = "compiled-static", key = "T(" + KEYS + ").of(#p0)")
    public String send(String payload) {
      return "sent-" + sends.incrementAndGet();
    }
  }

  /** A listener keyed by the getter: each delivery that runs is a send. */
  public static class Listener {
    final AtomicInteger sends = new AtomicInteger();

    @IdempotentListener(name = "compiled-listener", key = "#order.ref")
    public void onOrder(Order order) {
      sends.incrementAndGet();
    }

    /** The sends so far (a method: the bean is a proxy, whose fields are not the target's). */
    public int sends() {
      return sends.get();
    }
  }

  static final String KEYS = "dev.idempotency.spring.CompiledKeyExpressionProbe$Keys";

  public static void main(String[] args) {
    List<String> results = new ArrayList<>();
    new ApplicationContextRunner()
        .withConfiguration(
            AutoConfigurations.of(
                dev.idempotency.spring.autoconfigure.JacksonAutoConfigurations.jackson(),
                IdempotencyAutoConfiguration.class,
                IdempotencyMessagingAutoConfiguration.class))
        .withPropertyValues("idempotency.store=memory")
        .withBean(Notifier.class)
        .withBean(Listener.class)
        .run(
            context -> {
              if (context.getStartupFailure() != null) {
                results.add("RESULT start failed: " + context.getStartupFailure());
                return;
              }
              Notifier notifier = context.getBean(Notifier.class);
              String run = Long.toString(System.nanoTime());
              for (String id : List.of("a", "b", "flaky", "flaky")) {
                results.add(
                    call("getter " + id, () -> notifier.sendOrder(new Order(id + "-" + run))));
              }
              for (String id : List.of("a", "b", "flaky", "flaky")) {
                results.add(call("static " + id, () -> notifier.send(id + "-" + run)));
              }
              Listener listener = context.getBean(Listener.class);
              for (String id : List.of("a", "b", "flaky", "flaky")) {
                results.add(
                    call(
                        "listener " + id,
                        () -> {
                          listener.onOrder(new Order("listener-" + id + "-" + run));
                          return "sent-" + listener.sends();
                        }));
              }
            });
    results.forEach(System.out::println);
    System.out.flush();
  }

  private static String call(String what, java.util.function.Supplier<String> send) {
    try {
      return "RESULT " + what + ": " + send.get();
    } catch (RuntimeException e) {
      return "RESULT "
          + what
          + ": threw "
          + e.getClass().getSimpleName()
          + " ("
          + e.getMessage()
          + ")";
    }
  }
}
