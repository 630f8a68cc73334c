package dev.idempotency.spring.web;

import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;

/**
 * The provider of an async-timeout test's controller ({@link AsyncTimeoutApplicationTest}): a call
 * begun while the test's request is being answered ({@link #untilAnswered}) ends once the client
 * has that answer, or after 30 s; any other call ends at once. A provider call of a fixed time
 * longer than the container's timeout made each row wait that time, and could end before a late
 * timeout (Tomcat checks async timeouts about once a second, later on a busy machine), so the first
 * answer was then the send's own. One per controller, used by one test at a time.
 */
final class FirstAnswer {

  private volatile CompletableFuture<Void> answered = CompletableFuture.completedFuture(null);

  /** Runs each command once the request being answered has its answer, at once if none is. */
  Executor provider() {
    return work -> answered.whenCompleteAsync((done, failed) -> work.run());
  }

  /**
   * Sends {@code request}: the provider calls begun meanwhile end once it returned (at most 30 s).
   *
   * @return the request's answer
   */
  <T> T untilAnswered(Callable<T> request) throws Exception {
    answered = new CompletableFuture<Void>().completeOnTimeout(null, 30, TimeUnit.SECONDS);
    try {
      return request.call();
    } finally {
      answered.complete(null);
    }
  }
}
