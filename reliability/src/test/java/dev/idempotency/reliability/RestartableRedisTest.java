package dev.idempotency.reliability;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Test;

/**
 * This module runs two test classes at a time, and each starts its own redis-server. The embedded
 * binary was once written to a new file for every server: a server started while another thread was
 * writing its copy failed with {@code error=26, Text file busy}, as {@code ClockSkewTest} did in
 * CI. Eight servers started at once, five times, must all start.
 */
class RestartableRedisTest {

  @Test
  void serversStartedFromManyThreadsAtOnceAllStart() throws Exception {
    ExecutorService threads = Executors.newFixedThreadPool(8);
    List<String> failures = new ArrayList<>();
    try {
      for (int round = 0; round < 5; round++) {
        List<Future<RestartableRedis>> starts = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
          starts.add(threads.submit(() -> new RestartableRedis(false)));
        }
        for (Future<RestartableRedis> start : starts) {
          try (RestartableRedis redis = start.get()) {
            assertThat(redis.port).isPositive();
          } catch (java.util.concurrent.ExecutionException e) {
            failures.add(rootCause(e).toString());
          }
        }
      }
    } finally {
      threads.shutdownNow();
    }
    assertThat(failures).isEmpty();
  }

  private static Throwable rootCause(Throwable t) {
    while (t.getCause() != null) {
      t = t.getCause();
    }
    return t;
  }
}
