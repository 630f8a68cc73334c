package dev.idempotency.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import org.junit.jupiter.api.Test;
import org.springframework.expression.AccessException;
import org.springframework.expression.EvaluationContext;
import org.springframework.expression.IndexAccessor;
import org.springframework.expression.PropertyAccessor;
import org.springframework.expression.TypedValue;
import org.springframework.expression.spel.SpelEvaluationException;
import org.springframework.expression.spel.SpelMessage;
import org.springframework.expression.spel.support.StandardEvaluationContext;

/**
 * {@link ExpressionAttributes#failedOnItsInput} for the SpEL codes that wrap a call the starter's
 * own evaluation contexts cannot reach (they register no accessor of their own, so {@link
 * IndexedKeyLookUpProbeTest} covers the rest through real calls): an accessor's own exception under
 * EXCEPTION_DURING_PROPERTY_READ and EXCEPTION_DURING_INDEX_READ is the called code's failure; an
 * accessor that finds nothing, and SpEL's verdict on the values (an invalid pattern), are the
 * input's. The index accessor's row failed before fixindex on Boot 3.5 and 4.0 (only
 * EXCEPTION_DURING_PROPERTY_READ and CONSTRUCTOR_INVOCATION_PROBLEM were looked through); the
 * others passed before as after.
 */
class ExpressionAttributesCalledCodeTest {

  /** A target that only the accessors below read. */
  public static final class Order {}

  /** Reads any property of an {@link Order}: a look-up that times out, or one that finds none. */
  static final class LookUps implements PropertyAccessor, IndexAccessor {
    @Override
    public Class<?>[] getSpecificTargetClasses() {
      return new Class<?>[] {Order.class};
    }

    @Override
    public boolean canRead(EvaluationContext context, Object target, String name) {
      return true;
    }

    @Override
    public TypedValue read(EvaluationContext context, Object target, String name)
        throws AccessException {
      return look(name);
    }

    @Override
    public boolean canRead(EvaluationContext context, Object target, Object index) {
      return true;
    }

    @Override
    public TypedValue read(EvaluationContext context, Object target, Object index)
        throws AccessException {
      return look(index.toString());
    }

    private static TypedValue look(String name) throws AccessException {
      if (name.equals("missing")) {
        throw new AccessException("no property '" + name + "'");
      }
      throw new IllegalStateException("the look-up timed out (transient)");
    }

    @Override
    public boolean canWrite(EvaluationContext context, Object target, String name) {
      return false;
    }

    @Override
    public void write(EvaluationContext context, Object target, String name, Object newValue) {
      throw new UnsupportedOperationException();
    }

    @Override
    public boolean canWrite(EvaluationContext context, Object target, Object index) {
      return false;
    }

    @Override
    public void write(EvaluationContext context, Object target, Object index, Object newValue) {
      throw new UnsupportedOperationException();
    }
  }

  private static SpelEvaluationException failure(String expression) {
    StandardEvaluationContext context = new StandardEvaluationContext(new Order());
    LookUps lookUps = new LookUps();
    context.addPropertyAccessor(lookUps);
    context.addIndexAccessor(lookUps);
    return catchThrowableOfType(
        SpelEvaluationException.class,
        () -> ExpressionAttributes.parser().parseExpression(expression).getValue(context));
  }

  @Test
  void aPropertyAccessorsOwnExceptionIsTheCalledCodes() {
    SpelEvaluationException failure = failure("ref");

    assertThat(failure.getMessageCode()).isEqualTo(SpelMessage.EXCEPTION_DURING_PROPERTY_READ);
    assertThat(ExpressionAttributes.failedOnItsInput(failure)).isFalse();
  }

  @Test
  void anIndexAccessorsOwnExceptionIsTheCalledCodes() {
    SpelEvaluationException failure = failure("['ref']");

    assertThat(failure.getMessageCode()).isEqualTo(SpelMessage.EXCEPTION_DURING_INDEX_READ);
    assertThat(ExpressionAttributes.failedOnItsInput(failure)).isFalse();
  }

  @Test
  void anAccessorThatFindsNothingIsTheInputs() {
    SpelEvaluationException property = failure("missing");
    SpelEvaluationException index = failure("['missing']");

    assertThat(property.getMessageCode()).isEqualTo(SpelMessage.EXCEPTION_DURING_PROPERTY_READ);
    assertThat(ExpressionAttributes.failedOnItsInput(property)).isTrue();
    assertThat(index.getMessageCode()).isEqualTo(SpelMessage.EXCEPTION_DURING_INDEX_READ);
    assertThat(ExpressionAttributes.failedOnItsInput(index)).isTrue();
  }

  @Test
  void spelsVerdictOnTheValuesIsTheInputsWhateverItWraps() {
    SpelEvaluationException failure = failure("'a' matches '['");

    assertThat(failure.getMessageCode()).isEqualTo(SpelMessage.INVALID_PATTERN);
    assertThat(failure.getCause()).isNotNull();
    assertThat(ExpressionAttributes.failedOnItsInput(failure)).isTrue();
  }
}
