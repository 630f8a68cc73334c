package dev.idempotency.spring.web;

import dev.idempotency.spring.app.Runs;
import org.junit.jupiter.api.BeforeEach;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.web.server.LocalServerPort;

/**
 * A test of the running test application over real HTTP: its port, and how often its handlers ran
 * since the test started. Subclasses bring the {@code @SpringBootTest} of their variant.
 */
abstract class RunningApplication implements EndpointClient {

  @LocalServerPort int port;
  @Autowired Runs handlerRuns;
  private int runsBefore;

  @BeforeEach
  void rememberRuns() {
    runsBefore = handlerRuns.get();
  }

  @Override
  public int port() {
    return port;
  }

  @Override
  public int runs() {
    return handlerRuns.get() - runsBefore;
  }
}
