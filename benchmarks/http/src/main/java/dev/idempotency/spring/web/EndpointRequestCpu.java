package dev.idempotency.spring.web;

import dev.idempotency.IdempotencyKey;
import dev.idempotency.spring.Jackson3JsonCodecs;
import dev.idempotency.spring.JsonCodecs;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.function.IntFunction;
import tools.jackson.databind.json.JsonMapper;

/**
 * CPU time per request of {@link EndpointRequestBenchmark}'s store-free parts, read from the
 * measuring thread's own CPU clock ({@link ThreadMXBean#getCurrentThreadCpuTime()}), which time
 * spent waiting for a core on a busy machine does not move as it moves JMH's wall-clock scores.
 * Single-threaded; medians of the rounds after the warm-up rounds.
 *
 * <pre>{@code
 * java -cp "benchmarks/http/target/classes:$(cat benchmarks/http/target/classpath.txt)" \
 *     dev.idempotency.spring.web.EndpointRequestCpu [operations per round] [rounds]
 * }</pre>
 */
public final class EndpointRequestCpu {

  private EndpointRequestCpu() {}

  public static void main(String[] args) throws Exception {
    int operations = args.length > 0 ? Integer.parseInt(args[0]) : 200_000;
    int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 7;
    JsonCodecs json = new Jackson3JsonCodecs(JsonMapper.builder().build());
    String[] keys = new String[4096];
    for (int i = 0; i < keys.length; i++) {
      keys[i] = String.format("run-bench-t1-%012d", i);
    }
    measure(
        "keyAndOperation",
        operations,
        rounds,
        i ->
            EndpointKeys.check(
                        "Idempotency-Key", List.of(keys[i & 4095]), true, "POST", "/guarded", "", 8)
                    .hashCode()
                + EndpointKeys.operation("POST", "/guarded").length());
    measure(
        "fingerprint",
        operations,
        rounds,
        i ->
            BodyFingerprint.ofBody(
                    "/guarded", null, "application/json", EndpointRequestBenchmark.BODY, json)
                .length());
    measure("keyDigest", operations, rounds, i -> IdempotencyKey.digest(keys[i & 4095]).length());
  }

  private static void measure(
      String name, int operations, int rounds, IntFunction<Integer> operation) {
    ThreadMXBean threads = ManagementFactory.getThreadMXBean();
    List<Double> perOperation = new ArrayList<>();
    long sink = 0;
    for (int round = 0; round < rounds + 3; round++) {
      long start = threads.getCurrentThreadCpuTime();
      for (int i = 0; i < operations; i++) {
        sink += operation.apply(i);
      }
      long spent = threads.getCurrentThreadCpuTime() - start;
      if (round >= 3) { // three rounds of warm-up (JIT)
        perOperation.add((double) spent / operations);
      }
    }
    Collections.sort(perOperation);
    System.out.printf(
        "%-16s CPU ns/op median %.0f (min %.0f, max %.0f, %d rounds of %d) [%d]%n",
        name,
        perOperation.get(perOperation.size() / 2),
        perOperation.get(0),
        perOperation.get(perOperation.size() - 1),
        rounds,
        operations,
        sink & 1);
  }
}
