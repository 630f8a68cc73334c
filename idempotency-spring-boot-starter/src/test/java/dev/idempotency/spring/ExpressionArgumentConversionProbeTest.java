package dev.idempotency.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.expression.EvaluationException;
import org.springframework.expression.Expression;
import org.springframework.expression.spel.SpelEvaluationException;
import org.springframework.expression.spel.SpelMessage;
import org.springframework.expression.spel.support.StandardEvaluationContext;
import org.springframework.util.MimeType;

/**
 * Probe (probeA, of fixindex 9610b2fd): a key expression's argument converted by the application's
 * own code. SpEL converts a method's or constructor's argument with the context's conversion
 * service, whose {@code ObjectToObjectConverter} calls the target type's static {@code
 * valueOf(String)} (or {@code of}, {@code from}, a constructor): code of the application, which may
 * fail for a moment (a look-up that timed out). fixindex reads "a value that cannot be converted to
 * the type of the method's or constructor's parameter" as the input's failure, the same at every
 * call, so an invalid key (on a listener, a poison message, never retried). fixexpr tells them
 * apart by the types of the conversion that failed: one of the application's types (its code ran,
 * and threw) is the called code's failure, retried as the direct call; a conversion by Spring's own
 * converters between the JDK's or Spring's types, or to an enum, is the input's, which the rows of
 * {@link #aConversionThatCannotConvertTheInputStaysTheInputsFailure} keep.
 */
class ExpressionArgumentConversionProbeTest {

  /** A customer, converted from its id by a look-up that may time out. */
  public static final class Customer {
    static volatile boolean lookUpDown;

    final String id;

    private Customer(String id) {
      this.id = id;
    }

    /** The look-up the conversion service calls for a String argument. */
    public static Customer valueOf(String id) {
      if (lookUpDown) {
        throw new IllegalStateException("the customer look-up timed out (transient)");
      }
      if (!id.startsWith("c-")) {
        throw new IllegalArgumentException("not a customer id");
      }
      return new Customer(id);
    }
  }

  /** A channel, an enum of the application's. */
  public enum Channel {
    /** By e-mail. */
    EMAIL
  }

  /** The application's key helper. */
  public static final class Keys {
    private Keys() {}

    /** The key of a customer's notice. */
    public static String of(Customer customer) {
      return "notice-" + customer.id;
    }

    /** The key of a notice to several customers. */
    public static String ofAll(List<Customer> customers) {
      return "notice-" + customers.size();
    }

    /** The key of a notice by channel. */
    public static String ofChannel(Channel channel) {
      return "notice-" + channel;
    }

    /** The key of a notice of a content type (Spring's type). */
    public static String ofMimeType(MimeType type) {
      return "notice-" + type;
    }

    /** The key of a notice of a day (the JDK's type, of the platform class loader). */
    public static String ofDay(java.sql.Date day) {
      return "notice-" + day;
    }
  }

  /** A message's payload. */
  public static final class Order {
    /** The customer's id, a String. */
    public String getCustomerId() {
      return "c-42";
    }
  }

  /** A key built by the application's constructor. */
  public static final class NoticeKey {
    final String value;

    /** From a customer. */
    public NoticeKey(Customer customer) {
      this.value = "notice-" + customer.id;
    }

    @Override
    public String toString() {
      return value;
    }
  }

  private static Object evaluate(String source) {
    Expression expression = ExpressionAttributes.parser().parseExpression(source);
    return expression.getValue(new StandardEvaluationContext(new Order()));
  }

  /*
   * Was an open finding (probeA, on ad1148aa; a lost send in SPEC 1's terms for a listener, its
   * message dropped as a poison message on a transient failure; rare), fixed by fixexpr. Expected:
   * the look-up's own failure (failedOnItsInput false: retried, as the same look-up called as
   * T(Keys).of(...) directly is). Failed before the fix on Boot 3.5 and 4.0 alike: "the method's
   * argument's look-up failed: SpelEvaluationException: EL1029E ... <- AccessException ... <-
   * SpelEvaluationException: EL1001E: Type conversion problem, cannot convert from
   * java.lang.String to ...$Customer <- ConversionFailedException ... <- IllegalStateException:
   * the customer look-up timed out (transient) Expecting value to be false but was true". The list
   * row (each element converted by the same look-up) was added with the fix.
   */
  @Test
  void aConversionThatCallsTheApplicationsLookUpIsNotTheInputsFailure() {
    String method =
        "T(dev.idempotency.spring.ExpressionArgumentConversionProbeTest$Keys).of(customerId)";
    String constructor =
        "new dev.idempotency.spring.ExpressionArgumentConversionProbeTest$NoticeKey(customerId)"
            + ".toString()";
    String list =
        "T(dev.idempotency.spring.ExpressionArgumentConversionProbeTest$Keys)"
            + ".ofAll(customerId + ',c-43')";
    EvaluationException byMethod;
    EvaluationException byConstructor;
    EvaluationException byList;
    Customer.lookUpDown = true;
    try {
      byMethod = catchThrowableOfType(EvaluationException.class, () -> evaluate(method));
      byConstructor = catchThrowableOfType(EvaluationException.class, () -> evaluate(constructor));
      byList = catchThrowableOfType(EvaluationException.class, () -> evaluate(list));
    } finally {
      Customer.lookUpDown = false;
    }

    assertThat(evaluate(method)).as("the look-up back").isEqualTo("notice-c-42");
    assertThat(evaluate(constructor)).as("the look-up back").isEqualTo("notice-c-42");
    assertThat(evaluate(list)).as("the look-up back").isEqualTo("notice-2");
    assertThat(byMethod).as("the method's argument").isNotNull();
    assertThat(byConstructor).as("the constructor's argument").isNotNull();
    assertThat(byList).as("the list's elements").isNotNull();
    assertThat(ExpressionAttributes.failedOnItsInput(byMethod))
        .as("the method's argument's look-up failed: " + chain(byMethod))
        .isFalse();
    assertThat(ExpressionAttributes.failedOnItsInput(byConstructor))
        .as("the constructor's argument's look-up failed: " + chain(byConstructor))
        .isFalse();
    assertThat(ExpressionAttributes.failedOnItsInput(byList))
        .as("the list's elements' look-up failed: " + chain(byList))
        .isFalse();
  }

  /**
   * The application's conversion code refusing the value (a String that is no customer id) is that
   * code's failure as well, as it is when the expression calls {@code Customer.valueOf} itself: the
   * starter cannot tell a look-up's refusal from its timeout, so it never drops the message for
   * either (SPEC 1: no lost send). Failed before fixexpr on Boot 3.5 and 4.0 ("the application's
   * valueOf refused 'x-42': ... <- ConversionFailedException ... <- IllegalArgumentException: not a
   * customer id Expecting value to be false but was true").
   */
  @Test
  void theApplicationsConversionRefusingTheValueIsTheCalledCodesAsCalledDirectly() {
    String converted =
        "T(dev.idempotency.spring.ExpressionArgumentConversionProbeTest$Keys).of('x-42')";
    String direct =
        "T(dev.idempotency.spring.ExpressionArgumentConversionProbeTest$Keys)"
            + ".of(T(dev.idempotency.spring.ExpressionArgumentConversionProbeTest$Customer)"
            + ".valueOf('x-42'))";

    EvaluationException byConversion =
        catchThrowableOfType(EvaluationException.class, () -> evaluate(converted));
    RuntimeException byDirectCall =
        catchThrowableOfType(RuntimeException.class, () -> evaluate(direct));

    assertThat(byDirectCall).isInstanceOf(IllegalArgumentException.class); // not SpEL's: retried
    assertThat(conversionError(byConversion)).as(chain(byConversion)).isTrue();
    assertThat(ExpressionAttributes.failedOnItsInput(byConversion))
        .as("the application's valueOf refused 'x-42': " + chain(byConversion))
        .isFalse();
  }

  /**
   * An argument Spring's own converters cannot convert to the parameter's type stays the input's
   * failure, the same at every call (an invalid key; on a listener a poison message): a String that
   * is not a number for a {@code long} (a JDK constructor's parameter), nor a constant of the
   * application's enum (Spring's {@code Enum.valueOf}), nor a MIME type ({@code MimeType.valueOf},
   * Spring's type), nor a date ({@code java.sql.Date.valueOf}, the JDK's, of the platform class
   * loader). Each is SpEL's TYPE_CONVERSION_ERROR around a ConversionFailedException, as the
   * look-up's is (before fixexpr, every TYPE_CONVERSION_ERROR was taken for the input's; these rows
   * hold the line the fix draws).
   */
  @ParameterizedTest
  @ValueSource(
      strings = {
        "new java.util.concurrent.atomic.AtomicLong(customerId)",
        "T(dev.idempotency.spring.ExpressionArgumentConversionProbeTest$Keys).ofChannel(customerId)",
        "T(dev.idempotency.spring.ExpressionArgumentConversionProbeTest$Keys).ofMimeType(customerId)",
        "T(dev.idempotency.spring.ExpressionArgumentConversionProbeTest$Keys).ofDay(customerId)"
      })
  void aConversionThatCannotConvertTheInputStaysTheInputsFailure(String source) {
    EvaluationException failure =
        catchThrowableOfType(EvaluationException.class, () -> evaluate(source));

    assertThat(failure).as(source).isNotNull();
    assertThat(conversionError(failure)).as(chain(failure)).isTrue();
    assertThat(ExpressionAttributes.failedOnItsInput(failure))
        .as("cannot be converted: " + chain(failure))
        .isTrue();
  }

  /** The control: the same look-up called by the expression itself is the called code's. */
  @Test
  void theSameLookUpCalledDirectlyIsTheCalledCodes() {
    String direct =
        "T(dev.idempotency.spring.ExpressionArgumentConversionProbeTest$Keys)"
            + ".of(T(dev.idempotency.spring.ExpressionArgumentConversionProbeTest$Customer)"
            + ".valueOf(customerId))";
    Customer.lookUpDown = true;
    RuntimeException failure;
    try {
      failure = catchThrowableOfType(RuntimeException.class, () -> evaluate(direct));
    } finally {
      Customer.lookUpDown = false;
    }

    assertThat(failure).isInstanceOf(IllegalStateException.class); // SpEL lets it out as it is
    assertThat(evaluate(direct)).isEqualTo("notice-c-42");
  }

  /** Whether SpEL's TYPE_CONVERSION_ERROR is in the chain. */
  private static boolean conversionError(Throwable failure) {
    for (Throwable t = failure; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof SpelEvaluationException spel
          && spel.getMessageCode() == SpelMessage.TYPE_CONVERSION_ERROR) {
        return true;
      }
    }
    return false;
  }

  private static String chain(Throwable failure) {
    StringBuilder out = new StringBuilder();
    for (Throwable t = failure; t != null; t = t.getCause() == t ? null : t.getCause()) {
      out.append(out.length() == 0 ? "" : " <- ").append(t);
    }
    return out.toString();
  }
}
