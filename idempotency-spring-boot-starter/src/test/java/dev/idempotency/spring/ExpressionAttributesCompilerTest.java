package dev.idempotency.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import org.junit.jupiter.api.Test;
import org.springframework.expression.Expression;
import org.springframework.expression.spel.SpelCompilerMode;
import org.springframework.expression.spel.SpelEvaluationException;
import org.springframework.expression.spel.SpelMessage;
import org.springframework.expression.spel.SpelParserConfiguration;
import org.springframework.expression.spel.standard.SpelExpression;
import org.springframework.expression.spel.standard.SpelExpressionParser;

/**
 * {@link ExpressionAttributes#failedOnItsInput} and SpEL's compiler: the starter's parser never
 * compiles (a JVM-wide {@code spring.expression.compiler.mode} is {@link
 * CompiledKeyExpressionProbeTest}'s, in a JVM of its own), and an expression compiled by another
 * parser, whose failure SpEL wraps whatever threw, is never taken for a bad key.
 */
class ExpressionAttributesCompilerTest {

  /** An order whose reference look-up fails from its third read on (after compilation). */
  public static final class Order {
    private int reads;

    public String getRef() {
      if (++reads > 2) {
        throw new IllegalStateException("the look-up timed out (transient)");
      }
      return "ref-1";
    }
  }

  @Test
  void aCompiledExpressionsFailureIsTheCalledCodesNotItsInput() {
    SpelExpressionParser compiling =
        new SpelExpressionParser(new SpelParserConfiguration(SpelCompilerMode.IMMEDIATE, null));
    Expression key = compiling.parseExpression("ref");
    Order order = new Order();
    key.getValue(order);
    key.getValue(order); // IMMEDIATE compiles after the second evaluation
    assertThat(((SpelExpression) key).compileExpression()).as("compiled").isTrue();

    SpelEvaluationException failure =
        catchThrowableOfType(SpelEvaluationException.class, () -> key.getValue(order));

    assertThat(failure.getMessageCode())
        .isEqualTo(SpelMessage.EXCEPTION_RUNNING_COMPILED_EXPRESSION);
    assertThat(failure).rootCause().hasMessage("the look-up timed out (transient)");
    assertThat(ExpressionAttributes.failedOnItsInput(failure))
        .as("whatever threw inside a compiled expression: retried, not a poison message")
        .isFalse();
  }

  @Test
  void theStartersParserInterpretsAfterManyEvaluations() {
    Expression key = ExpressionAttributes.parser().parseExpression("ref");
    Order order = new Order();
    key.getValue(order);
    key.getValue(order);

    SpelEvaluationException failure =
        catchThrowableOfType(SpelEvaluationException.class, () -> key.getValue(order));

    assertThat(failure.getMessageCode())
        .as("the interpreter's exception, which failedOnItsInput reads")
        .isEqualTo(SpelMessage.EXCEPTION_DURING_PROPERTY_READ);
    assertThat(ExpressionAttributes.failedOnItsInput(failure)).isFalse();
  }
}
