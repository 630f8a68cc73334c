package dev.idempotency.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.expression.EvaluationException;
import org.springframework.expression.Expression;
import org.springframework.expression.spel.support.StandardEvaluationContext;

/**
 * Probe (probeA, of fixindex 9610b2fd): a key expression's argument converted by the application's
 * own code. SpEL converts a method's or constructor's argument with the context's conversion
 * service, whose {@code ObjectToObjectConverter} calls the target type's static {@code
 * valueOf(String)} (or {@code of}, {@code from}, a constructor): code of the application, which may
 * fail for a moment (a look-up that timed out). fixindex reads "a value that cannot be converted to
 * the type of the method's or constructor's parameter" as the input's failure, the same at every
 * call, so an invalid key (on a listener, a poison message, never retried).
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
   * Open finding (probeA, on ad1148aa, Boot 3.5 and 4.0 alike). Expected: the look-up's own failure
   * (failedOnItsInput false: retried, as the same look-up called as T(Keys).of(...) directly is).
   * Happened: failedOnItsInput true for both the method's and the constructor's argument (SpEL
   * TYPE_CONVERSION_ERROR beneath the call's code, with the look-up's IllegalStateException at the
   * bottom of the chain), and the same expression evaluates to "notice-c-42" once the look-up is
   * back: not the same failure at every call. Severity: lost send in SPEC 1's terms for a listener
   * (its message is dropped as a poison message on a transient failure), for a key whose argument
   * conversion runs application code that can fail for a moment (a static valueOf/of/from or a
   * one-argument constructor doing a look-up); rare.
   */
  @Tag("open-finding")
  @Test
  void aConversionThatCallsTheApplicationsLookUpIsNotTheInputsFailure() {
    String method =
        "T(dev.idempotency.spring.ExpressionArgumentConversionProbeTest$Keys).of(customerId)";
    String constructor =
        "new dev.idempotency.spring.ExpressionArgumentConversionProbeTest$NoticeKey(customerId)"
            + ".toString()";
    EvaluationException byMethod;
    EvaluationException byConstructor;
    Customer.lookUpDown = true;
    try {
      byMethod = catchThrowableOfType(EvaluationException.class, () -> evaluate(method));
      byConstructor = catchThrowableOfType(EvaluationException.class, () -> evaluate(constructor));
    } finally {
      Customer.lookUpDown = false;
    }

    assertThat(evaluate(method)).as("the look-up back").isEqualTo("notice-c-42");
    assertThat(evaluate(constructor)).as("the look-up back").isEqualTo("notice-c-42");
    assertThat(byMethod).as("the method's argument").isNotNull();
    assertThat(byConstructor).as("the constructor's argument").isNotNull();
    assertThat(ExpressionAttributes.failedOnItsInput(byMethod))
        .as("the method's argument's look-up failed: " + chain(byMethod))
        .isFalse();
    assertThat(ExpressionAttributes.failedOnItsInput(byConstructor))
        .as("the constructor's argument's look-up failed: " + chain(byConstructor))
        .isFalse();
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

  private static String chain(Throwable failure) {
    StringBuilder out = new StringBuilder();
    for (Throwable t = failure; t != null; t = t.getCause() == t ? null : t.getCause()) {
      out.append(out.length() == 0 ? "" : " <- ").append(t);
    }
    return out.toString();
  }
}
