package dev.idempotency.redis;

import dev.idempotency.spi.StoredRecord;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Reading a stored Redis record into the SPI's {@link StoredRecord} (issue 39): what every replay
 * on Redis does with the value {@code SET NX GET} returned, and what a claim that finds a record in
 * progress does. The completed value is the one {@code benchmarks/http/run.sh}'s Spring MVC
 * application stores (179 bytes: a 22-character owner token, a 43-character fingerprint, a 62-byte
 * stored response). Read with {@code -prof gc} ({@code gc.alloc.rate.norm}: bytes allocated per
 * read, which a busy machine does not move).
 *
 * <pre>{@code
 * java -jar benchmarks/target/benchmarks.jar RecordValueBenchmark -prof gc -f 1 -wi 3 -i 5 -w 2s -r 2s
 * }</pre>
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(1)
public class RecordValueBenchmark {

  private final byte[] completed = completedValue();
  private final byte[] inProgress =
      RecordValue.inProgress(
          "AqdU7WkguQoaOnePDrP4CQ",
          "er2cN9qm4agN0JgrTygHFy7azwvMvo3VVFWIhw_ehxQ",
          30_000,
          86_400_000,
          null);

  /** A replay: the completed record parsed and made the SPI's record (payload copied once). */
  @Benchmark
  public StoredRecord settled() {
    return RecordValue.parse(completed).settled();
  }

  /** A claim that found a record in progress: parsed and placed with the server's time. */
  @Benchmark
  public StoredRecord inProgress() {
    return RecordValue.parse(inProgress).inProgress(1_796_478_696_496L, 86_390_000);
  }

  private static byte[] completedValue() {
    byte[] payload = new byte[62];
    for (int i = 0; i < payload.length; i++) {
      payload[i] = (byte) ('a' + i % 26);
    }
    byte[] head =
        ("C22:AqdU7WkguQoaOnePDrP4CQ1:143:er2cN9qm4agN0JgrTygHFy7azwvMvo3VVFWIhw_ehxQ0:"
                + "5:300008:8640000013:17964786864962:2362:")
            .getBytes(StandardCharsets.US_ASCII);
    byte[] value = new byte[head.length + payload.length];
    System.arraycopy(head, 0, value, 0, head.length);
    System.arraycopy(payload, 0, value, head.length, payload.length);
    return value;
  }
}
