package dev.idempotency.spring.messaging;

import java.util.concurrent.atomic.AtomicBoolean;
import org.springframework.context.SmartLifecycle;

/**
 * A lifecycle bean for a child context under test: whether the child began starting its lifecycle
 * beans (its listener containers among them), read after a refresh that failed. Register it as a
 * singleton before the refresh.
 */
public final class ChildLifecycleProbe implements SmartLifecycle {

  private final AtomicBoolean started = new AtomicBoolean();
  private volatile boolean running;

  /** Whether {@link #start()} was ever called. */
  public boolean started() {
    return started.get();
  }

  @Override
  public void start() {
    started.set(true);
    running = true;
  }

  @Override
  public void stop() {
    running = false;
  }

  @Override
  public boolean isRunning() {
    return running;
  }
}
