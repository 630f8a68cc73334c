package dev.idempotency.reliability;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The end-to-end fault run ({@link E2eFaultRun}) for a short seeded stretch inside {@code mvn
 * verify}; {@code -De2e.seconds=180 -De2e.seed=N} (or {@code reliability-boot/e2e-fault-run.sh})
 * for a long one; {@code -De2e.kafka=false} leaves out the Kafka listener and its broker; {@code
 * -De2e.app-args="--a=b --c=d"} passes the application more arguments. The history stays in {@code
 * target/e2e-runs/seed-<seed>/}.
 */
class E2eFaultRunTest {

  @Test
  void noKeySentTwiceWithoutAnAllowedCauseAndNothingLost() throws Exception {
    // seed 10's first round starts with a broker restart, a store outage and a SIGTERM, which fit
    // in 30 s on a busy machine (a kill follows when there is time)
    long seed = Long.getLong("e2e.seed", 10);
    Duration duration = Duration.ofSeconds(Long.getLong("e2e.seconds", 30));
    Path dir = Path.of("target", "e2e-runs", "seed-" + seed + "-" + System.currentTimeMillis());
    Files.createDirectories(dir);

    // more application arguments, to show what the checker finds on a weakened build (docs)
    List<String> appArgs =
        Arrays.stream(System.getProperty("e2e.app-args", "").split(" "))
            .filter(arg -> !arg.isBlank())
            .toList();
    E2eFaultRun.Result result =
        new E2eFaultRun(
                E2eFaultRun.Settings.shortRun(seed, duration)
                    .withAppArgs(appArgs)
                    .withKafka(Boolean.parseBoolean(System.getProperty("e2e.kafka", "true"))),
                dir)
            .run();

    String summary =
        "seed "
            + seed
            + ", "
            + duration.toSeconds()
            + " s of faults, "
            + result.instances()
            + " application instances, "
            + result.strikes()
            + ", "
            + result.runMillis()
            + " ms in all: "
            + result.report()
            + " problems="
            + result.problems().subList(0, Math.min(10, result.problems().size()))
            + " (history in "
            + dir.toAbsolutePath()
            + ")";
    System.out.println("e2e fault run: " + summary);
    Files.writeString(dir.resolve("report.txt"), summary + "\n");
    assertThat(result.report().duplicates.faults).as(summary).isNotEmpty();
    assertThat(result.report().duplicates.sends).as(summary).isPositive();
    assertThat(result.problems()).as(summary).isEmpty();
    assertThat(result.report().ok()).as(summary).isTrue();
  }
}
