package dev.idempotency.spring.web;

import dev.idempotency.spring.Jackson2JsonCodecs;
import dev.idempotency.spring.Jackson3JsonCodecs;
import dev.idempotency.spring.JsonCodecs;
import java.nio.charset.StandardCharsets;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The request fingerprint of {@link IdempotentEndpoint} alone (issue 39): path, query and body, for
 * JSON bodies of about 200 B, 2 KB and 20 KB (a notification request: recipients, a template,
 * variables, numbers in several spellings, members in no particular order) and a 2 KB body that is
 * not JSON, on the Jackson 3 mapper (Boot 4) and the Jackson 2 one (Boot 3.5). Read with {@code
 * -prof gc} for the bytes allocated per fingerprint.
 *
 * <pre>{@code
 * java -cp "benchmarks/http/target/classes:$(cat benchmarks/http/target/classpath.txt)" \
 *     org.openjdk.jmh.Main FingerprintBenchmark -prof gc -f 1 -wi 3 -i 5 -w 2s -r 2s
 * }</pre>
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(1)
@State(Scope.Thread)
public class FingerprintBenchmark {

  /** The body: JSON of about this many bytes, or {@code bytes} (2 KB, not JSON). */
  @Param({"json-200", "json-2k", "json-20k", "bytes-2k"})
  String body;

  /** The application's mapper: Jackson 3 (Spring Boot 4) or Jackson 2 (Spring Boot 3.5). */
  @Param({"jackson3", "jackson2"})
  String jackson;

  /** A one-time password by SMS: 193 bytes. */
  static final String SMALL =
      "{\"to\":\"+15550100\",\"template\":\"otp\",\"channel\":\"sms\",\"variables\":"
          + "{\"code\":\"123456\",\"ttl\":300},\"locale\":\"en-US\",\"priority\":1.5,"
          + "\"tags\":[\"auth\",\"otp\"],\"callback\":\"https://example.com/cb?id=42\",\"x\":1}";

  JsonCodecs json;
  byte[] bytes;
  String contentType;

  @Setup
  public void setUp() {
    json =
        jackson.equals("jackson3")
            ? new Jackson3JsonCodecs(tools.jackson.databind.json.JsonMapper.builder().build())
            : new Jackson2JsonCodecs(new com.fasterxml.jackson.databind.ObjectMapper());
    switch (body) {
      case "json-200" -> bytes = SMALL.getBytes(StandardCharsets.UTF_8);
      case "json-2k" -> bytes = json(2_000);
      case "json-20k" -> bytes = json(20_000);
      case "bytes-2k" -> {
        bytes = new byte[2_000];
        new Random(7).nextBytes(bytes);
      }
      default -> throw new IllegalArgumentException(body);
    }
    contentType = body.startsWith("json") ? "application/json" : "application/octet-stream";
  }

  /** The fingerprint as the WebFlux filter and the MVC interceptor compute it for this body. */
  @Benchmark
  public String fingerprint() {
    return BodyFingerprint.ofBody("/notify", "channel=sms", contentType, bytes, json);
  }

  /**
   * A notification request of at least {@code size} bytes: a template, variables and a list of
   * recipients, each an object with its members in no particular order.
   */
  static byte[] json(int size) {
    Random random = new Random(size);
    StringBuilder out = new StringBuilder(size + 256);
    out.append("{\"template\":\"order-shipped\",\"channel\":\"sms\",\"priority\":2,")
        .append("\"variables\":{\"orderId\":\"A-1029384756\",\"total\":129.90,")
        .append("\"currency\":\"EUR\",\"items\":3,\"express\":true,\"eta\":\"2026-12-08\"},")
        .append("\"recipients\":[");
    int i = 0;
    do {
      if (i > 0) {
        out.append(',');
      }
      out.append("{\"to\":\"+1555")
          .append(String.format("%07d", random.nextInt(10_000_000)))
          .append("\",\"name\":\"Recipient ")
          .append(i)
          .append(" M\\u00fcller\",\"locale\":\"de-DE\",\"id\":")
          .append(1_000_000_000_000L + random.nextInt(1_000_000))
          .append(",\"score\":")
          .append(random.nextInt(1000))
          .append(".5e-1,\"optIn\":")
          .append(random.nextBoolean())
          .append(",\"tags\":[\"vip\",\"eu\"],\"last\":null}");
      i++;
    } while (out.length() < size - 30);
    out.append("],\"idempotent\":true}");
    return out.toString().getBytes(StandardCharsets.UTF_8);
  }
}
