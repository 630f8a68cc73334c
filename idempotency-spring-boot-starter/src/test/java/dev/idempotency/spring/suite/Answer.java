package dev.idempotency.spring.suite;

/**
 * What a caller of an entry point got: the HTTP status and body of its answer.
 *
 * @param status the HTTP status
 * @param body the body
 * @param retryAfter the {@code Retry-After} header, or null
 */
public record Answer(int status, String body, String retryAfter) {

  /** Whether this is a repeat refused while the first call still sends: 409 with Retry-After. */
  public boolean inProgress() {
    return status == 409 && retryAfter != null;
  }

  @Override
  public String toString() {
    return status + " " + body;
  }
}
