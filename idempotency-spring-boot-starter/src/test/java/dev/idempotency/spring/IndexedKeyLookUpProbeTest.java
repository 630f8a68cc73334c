package dev.idempotency.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.autoconfigure.IdempotencyAutoConfiguration;
import dev.idempotency.spring.autoconfigure.IdempotencyMessagingAutoConfiguration;
import dev.idempotency.spring.messaging.IdempotentListener;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

/**
 * probeZ, of fixspel (merge feffd05): keys are interpreted, so {@code
 * ExpressionAttributes.failedOnItsInput} sees the interpreter's exceptions, and a getter the key
 * calls that fails once is that getter's own failure, retried, never an invalid key (a poison
 * message on a listener: its send lost). This reaches the same getter through other SpEL shapes
 * that read a property: the indexer ({@code #order['ref']}, which reads the property through the
 * same accessors), the safe navigation ({@code #order?.ref}), a projection ({@code
 * #order.lines.![sku]}, each element's getter), and the record's accessor called as a method
 * ({@code #order.ref()}). fixindex adds a setter the key calls ({@code #order.ref = #order.id},
 * {@code #order['ref'] = #order.id}), and the other side: a key that cannot be worked out for its
 * arguments (a property the indexer cannot find, a constructor argument that cannot be converted)
 * stays a bad key. Each shape on an {@code @Idempotent} method and an {@code @IdempotentListener}
 * (called as a broker's container calls it: a direct call is a delivery): the first call, whose
 * look-up fails, must fail with the look-up's own failure (not {@code InvalidKeyException} nor
 * {@code InvalidIdempotencyKeyException}), and the second must send.
 */
class IndexedKeyLookUpProbeTest {

  /** An order whose reference look-up fails once per id, as a look-up that timed out does. */
  public record Order(String id, List<Line> lines) {
    static final Set<String> failedOnce = ConcurrentHashMap.newKeySet();
    static final Set<String> writeFailedOnce = ConcurrentHashMap.newKeySet();

    /** The order's reference, looked up: fails the first time for each id. */
    public String getRef() {
      if (failedOnce.add(id)) {
        throw new IllegalStateException("the look-up timed out (transient)");
      }
      return "ref-" + id;
    }

    /** The same look-up, named as a record's accessor. */
    public String ref() {
      return getRef();
    }

    /** Records the order's reference elsewhere (a write): fails the first time for each id. */
    public void setRef(String ref) {
      if (writeFailedOnce.add(id)) {
        throw new IllegalStateException("the write timed out (transient)");
      }
    }
  }

  /** A line of an order whose stock-keeping unit look-up fails once for its first line. */
  public record Line(String id) {
    static final Set<String> failedOnce = ConcurrentHashMap.newKeySet();

    /** The line's SKU, looked up: fails the first time for a first line ("-1"). */
    public String getSku() {
      if (id.endsWith("-1") && failedOnce.add(id)) {
        throw new IllegalStateException("the look-up timed out (transient)");
      }
      return "sku-" + id;
    }
  }

  /**
   * A customer, converted from an order's id by the conversion service (its static {@code
   * valueOf}), a look-up that fails once per id.
   */
  public static final class Customer {
    static final Set<String> failedOnce = ConcurrentHashMap.newKeySet();

    final String id;

    private Customer(String id) {
      this.id = id;
    }

    /** The look-up the conversion service calls for a String argument: fails once per id. */
    public static Customer valueOf(String id) {
      if (failedOnce.add(id)) {
        throw new IllegalStateException("the customer look-up timed out (transient)");
      }
      return new Customer(id);
    }
  }

  /** The key of a customer's notice, from a {@link Customer} converted from a String. */
  public static final class NoticeKey {
    final String value;

    /** A constructor whose argument the conversion service converts. */
    public NoticeKey(Customer customer) {
      this.value = "notice-" + customer.id;
    }

    /** A static method whose argument the conversion service converts. */
    public static String of(Customer customer) {
      return "notice-" + customer.id;
    }

    @Override
    public String toString() {
      return value;
    }
  }

  static final String CUSTOMER_KEY =
      "T(dev.idempotency.spring.IndexedKeyLookUpProbeTest$NoticeKey).of(#order.id)";

  static final String CONSTRUCTED_CUSTOMER_KEY =
      "new dev.idempotency.spring.IndexedKeyLookUpProbeTest$NoticeKey(#order.id)";

  /** The notifier: each call that runs is a send. */
  public static class Notifier {
    final AtomicInteger sends = new AtomicInteger();

    @Idempotent(name = "indexed", key = "#order['ref']")
    public String indexed(Order order) {
      return "sent-" + sends.incrementAndGet();
    }

    @Idempotent(name = "safe", key = "#order?.ref")
    public String safe(Order order) {
      return "sent-" + sends.incrementAndGet();
    }

    @Idempotent(name = "projected", key = "#order.lines.![sku]")
    public String projected(Order order) {
      return "sent-" + sends.incrementAndGet();
    }

    @Idempotent(name = "accessor", key = "#order.ref()")
    public String accessor(Order order) {
      return "sent-" + sends.incrementAndGet();
    }

    @Idempotent(name = "written", key = "#order.ref = #order.id")
    public String written(Order order) {
      return "sent-" + sends.incrementAndGet();
    }

    @Idempotent(name = "indexed-written", key = "#order['ref'] = #order.id")
    public String indexedWritten(Order order) {
      return "sent-" + sends.incrementAndGet();
    }

    @Idempotent(name = "missing", key = "#order['reference']")
    public String missing(Order order) {
      return "sent-" + sends.incrementAndGet();
    }

    @Idempotent(name = "converted", key = "new java.util.concurrent.atomic.AtomicLong(#order.id)")
    public String converted(Order order) {
      return "sent-" + sends.incrementAndGet();
    }

    @Idempotent(name = "argument-look-up", key = CUSTOMER_KEY)
    public String argumentLookUp(Order order) {
      return "sent-" + sends.incrementAndGet();
    }

    @Idempotent(name = "constructor-look-up", key = CONSTRUCTED_CUSTOMER_KEY)
    public String constructorLookUp(Order order) {
      return "sent-" + sends.incrementAndGet();
    }
  }

  /** The listener: each delivery that runs is a send. */
  public static class Listener {
    final AtomicInteger sends = new AtomicInteger();

    @IdempotentListener(name = "indexed-listener", key = "#order['ref']")
    public void indexed(Order order) {
      sends.incrementAndGet();
    }

    @IdempotentListener(name = "safe-listener", key = "#order?.ref")
    public void safe(Order order) {
      sends.incrementAndGet();
    }

    @IdempotentListener(name = "projected-listener", key = "#order.lines.![sku]")
    public void projected(Order order) {
      sends.incrementAndGet();
    }

    @IdempotentListener(name = "accessor-listener", key = "#order.ref()")
    public void accessor(Order order) {
      sends.incrementAndGet();
    }

    @IdempotentListener(name = "written-listener", key = "#order.ref = #order.id")
    public void written(Order order) {
      sends.incrementAndGet();
    }

    @IdempotentListener(name = "indexed-written-listener", key = "#order['ref'] = #order.id")
    public void indexedWritten(Order order) {
      sends.incrementAndGet();
    }

    @IdempotentListener(name = "missing-listener", key = "#order['reference']")
    public void missing(Order order) {
      sends.incrementAndGet();
    }

    @IdempotentListener(
        name = "converted-listener",
        key = "new java.util.concurrent.atomic.AtomicLong(#order.id)")
    public void converted(Order order) {
      sends.incrementAndGet();
    }

    @IdempotentListener(name = "argument-look-up-listener", key = CUSTOMER_KEY)
    public void argumentLookUp(Order order) {
      sends.incrementAndGet();
    }

    @IdempotentListener(name = "constructor-look-up-listener", key = CONSTRUCTED_CUSTOMER_KEY)
    public void constructorLookUp(Order order) {
      sends.incrementAndGet();
    }

    /** The sends so far (a method: the bean is a proxy, whose fields are not the target's). */
    public int sends() {
      return sends.get();
    }
  }

  /**
   * The getter reached by safe navigation, by a projection (each element's), and the record's
   * accessor called as a method: the look-up's own failure, retried; the second call sends. Passes
   * on Boot 3.5 and 4.0.
   */
  @ParameterizedTest
  @ValueSource(strings = {"safe", "projected", "accessor"})
  void aKeyLookUpThatFailsOnceIsRetriedNeverAnInvalidKey(String shape) {
    keyLookUpFailsOnce(shape);
  }

  /**
   * The getter reached by the indexer, {@code #order['ref']}: SpEL reports its failure as {@code
   * INDEXING_NOT_SUPPORTED_FOR_TYPE} (its cause an AccessException wrapping the getter's
   * InvocationTargetException), and a setter the key calls ({@code #order.ref = #order.id}, {@code
   * #order['ref'] = #order.id}) as {@code EXCEPTION_DURING_PROPERTY_WRITE}. Was an open finding
   * (probeZ, on 493e7d6; medium: a lost send, SPEC 1): failedOnItsInput took those codes for the
   * expression's own failure on its input, and a look-up that timed out once was an invalid key.
   * Failed before the fix on Boot 3.5 and 4.0: "Expecting actual: ["method: threw
   * InvalidKeyException", "method: sent-1", "listener: threw InvalidIdempotencyKeyException",
   * "listener: sent-1"]" (expected the getter's IllegalStateException first), the same for the
   * setters; on an @IdempotentListener a poison message, its send lost.
   */
  @ParameterizedTest
  @ValueSource(strings = {"indexed", "written", "indexed-written"})
  void aKeyLookUpThroughTheIndexerThatFailsOnceIsRetriedNeverAnInvalidKey(String shape) {
    keyLookUpFailsOnce(shape);
  }

  /**
   * A look-up the conversion service runs: the key's static method or constructor takes a {@link
   * Customer}, and SpEL converts the order's id to one through {@code Customer.valueOf}, which
   * fails once per id (SpEL's TYPE_CONVERSION_ERROR around the ConversionFailedException around the
   * look-up's IllegalStateException, beneath the call's code). Failed before fixexpr on Boot 3.5
   * and 4.0 (failedOnItsInput took every conversion's failure for the input's: an invalid key, on
   * the listener a poison message, its send lost); the same failure as the look-up called directly
   * ({@code T(Customer).valueOf(#order.id)}) now.
   */
  @ParameterizedTest
  @ValueSource(strings = {"argument-look-up", "constructor-look-up"})
  void aKeyLookUpThatTheConversionServiceRunsAndFailsOnceIsRetriedNeverAnInvalidKey(String shape) {
    keyLookUpFailsOnce(shape);
  }

  /**
   * A key that cannot be worked out for its arguments, the same at every call: a property the
   * indexer cannot find ({@code #order['reference']}: INDEXING_NOT_SUPPORTED_FOR_TYPE without a
   * cause), and a constructor's argument that cannot be converted to its parameter's type ({@code
   * new AtomicLong(#order.id)}, an id that is not a number: CONSTRUCTOR_INVOCATION_PROBLEM around a
   * TYPE_CONVERSION_ERROR): a bad key every time, on the listener a poison message, never retried.
   * The converted row failed before the fix on Boot 3.5 and 4.0 ("method: threw
   * NumberFormatException" ..., retried as a look-up's failure: a poison message redelivered for
   * ever), as failedOnItsInput took the converter's exception beneath the constructor's code for
   * the constructor's own.
   */
  @ParameterizedTest
  @ValueSource(strings = {"missing", "converted"})
  void aKeyThatCannotBeWorkedOutForItsArgumentsIsABadKey(String shape) {
    assertThat(calls(shape))
        .as("the calls keyed by %s, which cannot be worked out for their arguments", shape)
        .containsExactly(
            "method: threw InvalidKeyException",
            "method: threw InvalidKeyException",
            "listener: threw InvalidIdempotencyKeyException",
            "listener: threw InvalidIdempotencyKeyException");
  }

  private static void keyLookUpFailsOnce(String shape) {
    assertThat(calls(shape))
        .as("the calls keyed by %s, each look-up failing once", shape)
        .containsExactly(
            "method: threw IllegalStateException",
            "method: sent-1",
            "listener: threw IllegalStateException",
            "listener: sent-1");
  }

  /** Two calls of the method keyed by {@code shape}, then two deliveries to the listener. */
  private static List<String> calls(String shape) {
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
              assertThat(context).hasNotFailed();
              Notifier notifier = context.getBean(Notifier.class);
              Listener listener = context.getBean(Listener.class);
              Order order = order();
              for (int attempt = 1; attempt <= 2; attempt++) {
                results.add(call("method", () -> method(notifier, shape, order)));
              }
              Order delivered = order();
              for (int attempt = 1; attempt <= 2; attempt++) {
                results.add(
                    call(
                        "listener",
                        () -> {
                          listen(listener, shape, delivered);
                          return "sent-" + listener.sends();
                        }));
              }
            });
    return results;
  }

  private static Order order() {
    String id = UUID.randomUUID().toString();
    return new Order(id, List.of(new Line(id + "-1"), new Line(id + "-2")));
  }

  private static String method(Notifier notifier, String shape, Order order) {
    return switch (shape) {
      case "indexed" -> notifier.indexed(order);
      case "safe" -> notifier.safe(order);
      case "projected" -> notifier.projected(order);
      case "written" -> notifier.written(order);
      case "indexed-written" -> notifier.indexedWritten(order);
      case "missing" -> notifier.missing(order);
      case "converted" -> notifier.converted(order);
      case "argument-look-up" -> notifier.argumentLookUp(order);
      case "constructor-look-up" -> notifier.constructorLookUp(order);
      default -> notifier.accessor(order);
    };
  }

  private static void listen(Listener listener, String shape, Order order) {
    switch (shape) {
      case "indexed" -> listener.indexed(order);
      case "safe" -> listener.safe(order);
      case "projected" -> listener.projected(order);
      case "written" -> listener.written(order);
      case "indexed-written" -> listener.indexedWritten(order);
      case "missing" -> listener.missing(order);
      case "converted" -> listener.converted(order);
      case "argument-look-up" -> listener.argumentLookUp(order);
      case "constructor-look-up" -> listener.constructorLookUp(order);
      default -> listener.accessor(order);
    }
  }

  /**
   * What a call did: its result, or the class of the root of what it threw, where a look-up's own
   * failure is an {@code IllegalStateException}, however SpEL wrapped it, and an invalid key is
   * named as such.
   */
  private static String call(String what, Supplier<String> send) {
    try {
      return what + ": " + send.get();
    } catch (RuntimeException e) {
      String thrown = e.getClass().getSimpleName();
      if (!thrown.contains("Invalid") && !thrown.contains("Missing")) {
        Throwable root = e;
        while (root.getCause() != null && root.getCause() != root) {
          root = root.getCause();
        }
        thrown = root.getClass().getSimpleName();
      }
      return what + ": threw " + thrown;
    }
  }
}
