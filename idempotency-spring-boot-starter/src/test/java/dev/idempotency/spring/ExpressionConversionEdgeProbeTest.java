package dev.idempotency.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import java.lang.reflect.InvocationTargetException;
import java.net.SocketTimeoutException;
import java.time.ZoneId;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.springframework.expression.EvaluationException;
import org.springframework.expression.Expression;
import org.springframework.expression.spel.support.StandardEvaluationContext;

/**
 * Probe (probeI, of fixexpr d756130b): the edges of the line fixexpr draws between a key's argument
 * conversion that ran the application's code (its failure, retried) and one that could not convert
 * the input (a poison message). fixexpr decides by the conversion's source and target types: the
 * application's, not an enum. Here the application's code runs in conversions whose types do not
 * pass that test (its enum's own factory, its enum's {@code to…()} method), or throws what the rule
 * takes for reflection's own failure; and, as the control, an Error thrown by the application's
 * conversion.
 */
class ExpressionConversionEdgeProbeTest {

  private static final String SELF = "dev.idempotency.spring.ExpressionConversionEdgeProbeTest";

  /**
   * A tier, the application's enum, looked up by its numeric code (a look-up that may time out).
   */
  public enum Tier {
    /** The only tier. */
    GOLD;

    static final AtomicInteger failures = new AtomicInteger();

    /** The look-up the conversion service calls for a Long argument. */
    public static Tier of(Long code) {
      if (failures.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
        throw new IllegalStateException("the tier look-up timed out (transient)");
      }
      return GOLD;
    }
  }

  /** A region, the application's enum, whose zone comes from a look-up that may time out. */
  public enum Region {
    /** Europe. */
    EU;

    static final AtomicInteger failures = new AtomicInteger();

    /** The conversion service calls it to convert a Region to a ZoneId. */
    public ZoneId toZoneId() {
      if (failures.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
        throw new IllegalStateException("the region's zone look-up timed out (transient)");
      }
      return ZoneId.of("Europe/Paris");
    }
  }

  /** A customer, looked up through a reflective client (whose failure it passes on as it is). */
  public static final class Customer {
    static final AtomicInteger failures = new AtomicInteger();
    static final AtomicInteger overflows = new AtomicInteger();

    final String id;

    private Customer(String id) {
      this.id = id;
    }

    /** The look-up the conversion service calls for a String argument. */
    public static Customer valueOf(String id) throws InvocationTargetException {
      if (overflows.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
        throw new StackOverflowError("the look-up recursed too deep (once)");
      }
      if (failures.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
        // what a reflective RPC client's proxy lets out: the remote call's timeout, wrapped
        throw new InvocationTargetException(
            new SocketTimeoutException("the customer service timed out (transient)"));
      }
      return new Customer(id);
    }
  }

  /** The application's key helper. */
  public static final class Keys {
    private Keys() {}

    /** The key of a tier's notice. */
    public static String ofTier(Tier tier) {
      return "notice-" + tier;
    }

    /** The key of a notice in a zone. */
    public static String ofZone(ZoneId zone) {
      return "notice-" + zone;
    }

    /** The key of a customer's notice. */
    public static String of(Customer customer) {
      return "notice-" + customer.id;
    }
  }

  /** A message's payload. */
  public static final class Order {
    /** The tier's code, a Long. */
    public Long getTierCode() {
      return 7L;
    }

    /** The region, the application's enum. */
    public Region getRegion() {
      return Region.EU;
    }

    /** The customer's id, a String. */
    public String getCustomerId() {
      return "c-42";
    }
  }

  private static Object evaluate(String source) {
    Expression expression = ExpressionAttributes.parser().parseExpression(source);
    return expression.getValue(new StandardEvaluationContext(new Order()));
  }

  /** The expression's failure with the look-up down for one call, then its value with it back. */
  private static EvaluationException failingOnce(AtomicInteger failures, String source) {
    failures.set(1);
    EvaluationException failure;
    try {
      failure = catchThrowableOfType(EvaluationException.class, () -> evaluate(source));
    } finally {
      failures.set(0);
    }
    assertThat(failure).as(source + " with the look-up down").isNotNull();
    assertThat(evaluate(source)).as(source + " with the look-up back").isNotNull();
    return failure;
  }

  /*
   * Was an open finding (probeI on d756130b; fixed: the called code is told by the frames it threw
   * from, not by the conversion's types; a lost send in SPEC 1's terms for a listener: its message
   * dead-lettered or dropped as a poison message on a transient failure). A Long converted to the
   * application's enum runs the enum's own static of(Long) (ObjectToObjectConverter; only String
   * and Integer sources have Spring's enum converters), but isApplicationType excludes every enum,
   * so a look-up in it that timed out is taken for the input's failure. Expected: false. Happened
   * on Boot 3.5.7 and 4.0.7: true, for "EL1029E ... ofTier(...$Tier) <- AccessException <- EL1001E:
   * Type conversion problem, cannot convert from java.lang.Long to ...$Tier <-
   * ConversionFailedException <- IllegalStateException: the tier look-up timed out (transient)".
   * On a Kafka listener the message is dead-lettered, unsent (KafkaListenerTest's twin).
   */
  @Test
  void theApplicationsEnumFactoryFailingIsTheCalledCodesFailure() {
    EvaluationException failure =
        failingOnce(Tier.failures, "T(" + SELF + "$Keys).ofTier(tierCode)");

    assertThat(ExpressionAttributes.failedOnItsInput(failure))
        .as("Tier.of(Long) timed out: " + chain(failure))
        .isFalse();
  }

  /*
   * Was an open finding (probeI on d756130b; fixed: the called code is told by the frames it threw
   * from, not by the conversion's types; a lost send in SPEC 1's terms for a listener). The
   * application's enum converted to a JDK type runs the enum's own toZoneId()
   * (ObjectToObjectConverter's to<Target>() method): source an enum, target the JDK's, so neither
   * counts as the application's, and the look-up's timeout is taken for the input's failure. The
   * same method called by the expression itself (#region.toZoneId()) is retried. Expected: false.
   * Happened on Boot 3.5.7 and 4.0.7: true, for "... EL1001E: Type conversion problem, cannot
   * convert from ...$Region to java.time.ZoneId <- ConversionFailedException <-
   * IllegalStateException: the region's zone look-up timed out (transient)".
   */
  @Test
  void theApplicationsEnumToMethodFailingIsTheCalledCodesFailure() {
    EvaluationException failure =
        failingOnce(Region.failures, "T(" + SELF + "$Keys).ofZone(region)");

    assertThat(ExpressionAttributes.failedOnItsInput(failure))
        .as("Region.toZoneId() timed out: " + chain(failure))
        .isFalse();
  }

  /*
   * Was an open finding (probeI on d756130b; fixed: the called code is told by the frames it threw
   * from, not by the conversion's types; a lost send in SPEC 1's terms for a listener; rarer: the
   * application's conversion code must throw a ReflectiveOperationException of its own, as a
   * reflective client's call passes on its InvocationTargetException). conversionRanApplicationCode
   * takes any ReflectiveOperationException that is the ConversionFailedException's cause for
   * reflection's failure to call the member, but ObjectToObjectConverter has already unwrapped its
   * own InvocationTargetException: this one is what Customer.valueOf threw. The same valueOf
   * called directly by the expression is retried (ExpressionInvocationTargetException; that
   * assertion passed). Expected: false. Happened on Boot 3.5.7 and 4.0.7: true, for "... EL1001E
   * ... cannot convert from java.lang.String to ...$Customer <- ConversionFailedException <-
   * java.lang.reflect.InvocationTargetException <- java.net.SocketTimeoutException: the customer
   * service timed out (transient)".
   */
  @Test
  void aReflectiveExceptionTheApplicationsConversionThrowsIsItsOwnFailure() {
    EvaluationException failure =
        failingOnce(Customer.failures, "T(" + SELF + "$Keys).of(customerId)");
    EvaluationException direct =
        failingOnce(
            Customer.failures,
            "T(" + SELF + "$Keys).of(T(" + SELF + "$Customer).valueOf(customerId))");

    assertThat(ExpressionAttributes.failedOnItsInput(direct))
        .as("called directly: " + chain(direct))
        .isFalse();
    assertThat(ExpressionAttributes.failedOnItsInput(failure))
        .as("Customer.valueOf's InvocationTargetException: " + chain(failure))
        .isFalse();
  }

  /**
   * An Error the application's conversion code throws (a StackOverflowError in a look-up) is that
   * code's failure, retried, not a poison message: ObjectToObjectConverter unwraps it from its
   * InvocationTargetException into the ConversionFailedException's cause. Held on Boot 3.5.7 and
   * 4.0.7 (probeI, on d756130b).
   */
  @Test
  void anErrorTheApplicationsConversionThrowsIsItsOwnFailure() {
    EvaluationException failure =
        failingOnce(Customer.overflows, "T(" + SELF + "$Keys).of(customerId)");

    assertThat(ExpressionAttributes.failedOnItsInput(failure))
        .as("Customer.valueOf overflowed: " + chain(failure))
        .isFalse();
  }

  /**
   * A warm key (its method resolved at an earlier call, as every key's is after the first): SpEL's
   * MethodReference, whose cached executor failed with no InvocationTargetException beneath (an
   * argument's conversion), resolves the method again and calls it again, so the conversion, and
   * the application's look-up in it, runs twice in one evaluation: one transient failure passes
   * unseen, two in a row surface (and are then classified as above). So the open findings above
   * need a cold key (the first call after start) or two failures in a row; and a failing look-up is
   * called twice per evaluation.
   */
  @Test
  void aWarmKeyRunsAFailedConversionTwiceInOneEvaluation() {
    Expression expression =
        ExpressionAttributes.parser().parseExpression("T(" + SELF + "$Keys).ofTier(tierCode)");
    StandardEvaluationContext context = new StandardEvaluationContext(new Order());
    assertThat(expression.getValue(context)).isEqualTo("notice-GOLD");
    EvaluationException failure;
    try {
      Tier.failures.set(1);
      assertThat(expression.getValue(context)).as("one failure, warm").isEqualTo("notice-GOLD");
      assertThat(Tier.failures).as("the look-up's failure consumed").hasValue(0);
      Tier.failures.set(2);
      failure = catchThrowableOfType(EvaluationException.class, () -> expression.getValue(context));
      assertThat(Tier.failures).as("both failures consumed by one evaluation").hasValue(0);
    } finally {
      Tier.failures.set(0);
    }
    assertThat(failure).as("two failures in a row, warm").isNotNull();
  }

  private static String chain(Throwable failure) {
    StringBuilder out = new StringBuilder();
    for (Throwable t = failure; t != null; t = t.getCause() == t ? null : t.getCause()) {
      out.append(out.length() == 0 ? "" : " <- ").append(t);
    }
    return out.toString();
  }
}
