package dev.idempotency.spring;

import java.lang.reflect.Proxy;
import java.time.ZoneId;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Probe (probeL, of a238b7d0): the application's look-ups that a key's argument conversion runs
 * (SpEL's conversion service calls a type's static {@code valueOf}, or a source's {@code to…()}),
 * each failing as many times as its {@code failures} says (it timed out), then working. a238b7d0
 * tells the application's failure from the input's by the frames the exception was thrown from (one
 * that is neither the JDK's nor Spring's, above the conversion service's): these fail with frames
 * of other shapes. Shared by the listener's and the endpoint's probes (KafkaListenerTest,
 * KeyConversionFramesEndpointProbeTest); the key expression {@link #KEY} picks the type by the
 * value's prefix.
 */
public final class KeyConversionLookUps {

  /** The key expression over a String parameter {@code #event}. */
  public static final String KEY =
      "#event.startsWith('pet') ? T(org.springframework.samples.idempotencyprobe.PetType)"
          + ".keyOf(#event) : (#event.startsWith('plan') ? T(kotlin.idempotencyprobe.Plan)"
          + ".keyOf(#event) : (#event.startsWith('account') ? T(dev.idempotency.spring"
          + ".KeyConversionLookUps$Account).keyOf(#event) : (#event.startsWith('shop') ?"
          + " T(dev.idempotency.spring.KeyConversionLookUps$Shop).keyOf(#event) :"
          + " T(dev.idempotency.spring.KeyConversionLookUps).ofZone("
          + "T(dev.idempotency.spring.KeyConversionLookUps$Region).of(#event), #event))))";

  private KeyConversionLookUps() {}

  private static boolean failing(AtomicInteger failures) {
    return failures.getAndUpdate(n -> Math.max(0, n - 1)) > 0;
  }

  /**
   * An account, looked up by a client that answers with a CompletableFuture, joined with a timeout
   * ({@code orTimeout(..).thenApply(..).join()}): the timeout's TimeoutException, and the
   * CompletionException around it that join() throws as it is, are made on the JDK's timer thread,
   * whose frames are all the JDK's.
   */
  public static final class Account {
    /** How many look-ups time out before one works. */
    public static final AtomicInteger failures = new AtomicInteger();

    private final String id;

    private Account(String id) {
      this.id = id;
    }

    /**
     * The look-up the conversion service calls for a String argument.
     *
     * @param id the account's id
     * @return the account
     */
    public static Account valueOf(String id) {
      CompletableFuture<String> answer =
          failing(failures) ? new CompletableFuture<>() : CompletableFuture.completedFuture(id);
      return answer.orTimeout(50, TimeUnit.MILLISECONDS).thenApply(Account::new).join();
    }

    /**
     * The key of an account's notice.
     *
     * @param account the account, converted from the key's String argument
     * @return the key
     */
    public static String keyOf(Account account) {
      return "account-" + account.id;
    }
  }

  /**
   * A shop, looked up by a client that throws a preallocated timeout without a stack trace (as
   * Kafka's client does with its ApiExceptions, whose fillInStackTrace does nothing, Netty with
   * ReadTimeoutException.INSTANCE, and the JIT with an implicit NullPointerException thrown often
   * from compiled code: OmitStackTraceInFastThrow, on by default).
   */
  public static final class Shop {
    /** How many look-ups time out before one works. */
    public static final AtomicInteger failures = new AtomicInteger();

    private static final RuntimeException TIMED_OUT = new StacklessTimeout();

    private final String id;

    private Shop(String id) {
      this.id = id;
    }

    /**
     * The look-up the conversion service calls for a String argument.
     *
     * @param id the shop's id
     * @return the shop
     */
    public static Shop valueOf(String id) {
      if (failing(failures)) {
        throw TIMED_OUT;
      }
      return new Shop(id);
    }

    /**
     * The key of a shop's notice.
     *
     * @param shop the shop, converted from the key's String argument
     * @return the key
     */
    public static String keyOf(Shop shop) {
      return "shop-" + shop.id;
    }
  }

  /** A client's timeout, preallocated: no stack trace. */
  static final class StacklessTimeout extends RuntimeException {
    private static final long serialVersionUID = 1L;

    StacklessTimeout() {
      super("the shop look-up timed out (transient)", null, false, false);
    }
  }

  /**
   * A region, an interface of the application's whose instances are JDK proxies (as a client
   * library's): converting one to a ZoneId calls its {@code toZoneId()} through the proxy (frames
   * of {@code jdk.proxy}), handled by the application's lambda.
   */
  public interface Region {
    /** How many zone look-ups time out before one works. */
    AtomicInteger failures = new AtomicInteger();

    /**
     * The region's zone: the conversion service calls it to convert a Region to a ZoneId.
     *
     * @return the zone
     */
    ZoneId toZoneId();

    /**
     * A region by its name, a JDK proxy.
     *
     * @param name the region's name
     * @return the region
     */
    static Region of(String name) {
      return (Region)
          Proxy.newProxyInstance(
              Region.class.getClassLoader(),
              new Class<?>[] {Region.class},
              (proxy, method, arguments) -> {
                if (method.getName().equals("toZoneId")) {
                  if (failing(failures)) {
                    throw new IllegalStateException("the zone look-up timed out (transient)");
                  }
                  return ZoneId.of("Europe/Paris");
                }
                if (method.getName().equals("toString")) {
                  return "Region[" + name + "]";
                }
                return method.getName().equals("hashCode")
                    ? System.identityHashCode(proxy)
                    : proxy == arguments[0];
              });
    }
  }

  /**
   * The key of a notice in a zone.
   *
   * @param zone the zone, converted from the key's Region argument
   * @param event the event
   * @return the key
   */
  public static String ofZone(ZoneId zone, String event) {
    return "zone-" + zone + "-" + event;
  }
}
