package dev.idempotency.spring.app;

import java.util.concurrent.atomic.AtomicInteger;
import org.springframework.stereotype.Component;

/** How often the test application's handlers really ran, all of them together. */
@Component
public class Runs {

  private final AtomicInteger runs = new AtomicInteger();

  /** Counts one run and returns the count so far. */
  public int increment() {
    return runs.incrementAndGet();
  }

  /** The runs so far. */
  public int get() {
    return runs.get();
  }
}
