package dev.idempotency.spring;

/**
 * The key of an {@link Idempotent} call is not a usable key: its expression evaluated to null, or
 * the value, namespaced by the method's name, is blank, longer than {@link
 * dev.idempotency.IdempotencyKey#MAX_LENGTH} characters, or holds control characters. The method
 * did not run, nothing was sent and the store was not asked. Where the key comes from a request,
 * this is the client's bad input: {@link dev.idempotency.spring.web.IdempotencyExceptionHandler}
 * answers it with {@code 400} ({@code /problems/malformed-key}) as the endpoint does. A key that
 * would change on every call (from {@code Object.toString()}) is a defect of the application and
 * stays a plain {@link IllegalArgumentException}.
 */
public class InvalidKeyException extends IllegalArgumentException {

  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message what is wrong, naming the method (never the key)
   * @param cause the key check's own exception, or {@code null}
   */
  public InvalidKeyException(String message, Throwable cause) {
    super(message, cause);
  }
}
