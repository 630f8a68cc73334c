package dev.idempotency.spring;

/**
 * The starter refuses the application's configuration while it starts: a setup that would send a
 * notification twice, lose one, or fail every call (the records table missing, a guarded method no
 * advisor guards, a listener container the starter cannot support, two methods sharing one key
 * namespace, a window not longer than the lease). Its message is the problem, then what to do;
 * Spring Boot prints the two apart, under "Description" and "Action", whatever exceptions Spring
 * wrapped it in (the starter's {@code FailureAnalyzer}).
 *
 * <p>It is an {@link IllegalStateException}, as these refusals were before it existed.
 */
public class IdempotencyConfigurationException extends IllegalStateException {

  private static final long serialVersionUID = 1L;

  /** What is wrong and what it would cause. */
  private final String problem;

  /** What to do about it. */
  private final String action;

  /**
   * Creates the exception; its message is {@code problem}, a space, then {@code action}.
   *
   * @param problem what is wrong and what it would cause, naming the bean, method, container or
   *     property (never a key)
   * @param action what to do about it
   */
  public IdempotencyConfigurationException(String problem, String action) {
    super(problem + " " + action);
    this.problem = problem;
    this.action = action;
  }

  /**
   * What is wrong and what it would cause.
   *
   * @return the problem, the first part of the message
   */
  public String getProblem() {
    return problem;
  }

  /**
   * What to do about it.
   *
   * @return the action, the last part of the message
   */
  public String getAction() {
    return action;
  }
}
