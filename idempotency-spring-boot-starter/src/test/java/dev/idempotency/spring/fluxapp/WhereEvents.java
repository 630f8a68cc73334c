package dev.idempotency.spring.fluxapp;

import dev.idempotency.IdempotencyEvent;
import dev.idempotency.IdempotencyListener;
import java.util.concurrent.atomic.AtomicReference;
import org.springframework.stereotype.Component;

/** The thread on which the guard recorded {@code /where}'s last send as completed. */
@Component
public class WhereEvents implements IdempotencyListener {

  private final AtomicReference<String> completedOn = new AtomicReference<>();

  @Override
  public void onEvent(IdempotencyEvent event) {
    if (event.type() == IdempotencyEvent.Type.COMPLETED && event.operation().contains("where")) {
      completedOn.set(Thread.currentThread().getName());
    }
  }

  /** Forgets the last one. */
  public void reset() {
    completedOn.set(null);
  }

  /** The thread's name, or null if none was recorded since the last reset. */
  public String completedOn() {
    return completedOn.get();
  }
}
