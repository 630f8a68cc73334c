package dev.idempotency.benchmarks;

import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordedMethod;
import jdk.jfr.consumer.RecordingFile;

/**
 * Where the slow replays of a peers-harness run go: reads the JFR recording of one harness JVM and
 * sets each measured replay beside what the JVM did meanwhile (C2 and C1 compilations,
 * deoptimizations, safepoints, collections).
 *
 * <p>The recording comes from the harness's driver with {@code
 * benchmarks/scale/peers-driver-jfr.patch} applied (a {@code peers.Op} event around every timed
 * call, and the recording dumped before the driver halts), run with the settings {@code
 * benchmarks/scale/tail-jfc.py} writes (compilations, safepoints and parks recorded whatever their
 * length):
 *
 * <pre>
 * JAVA_OPTS="-Xms512m -Xmx512m -Ddriver.jfrDump=/tmp/jfr \
 *     -XX:StartFlightRecording=filename=/tmp/jfr/,settings=/tmp/tail.jfc" \
 *     OURS=1 ROUNDS=3 KEYS=30000 WARMUP=10000 THREADS=1 PEERS="ours-redis floor-redis" ./run.sh
 * java -cp benchmarks/target/benchmarks.jar dev.idempotency.benchmarks.HarnessTail /tmp/jfr/*.jfr
 * </pre>
 *
 * For each recording: the replay pass's throughput and percentiles (from the events, so they match
 * the harness's within the event's own cost), what was compiled, deoptimized and paused during it,
 * and of the replays slower than {@code -DslowUs} (300 µs by default) how many overlapped a C2
 * compilation, against the share of all replays that did. With {@code -Dlist=true} it also lists
 * the pass's deoptimizations and C2 compilations.
 */
public final class HarnessTail {

  private record Span(long start, long end) {
    boolean overlaps(long from, long to) {
      return start < to && end > from;
    }

    long overlap(long from, long to) {
      return Math.max(0, Math.min(end, to) - Math.max(start, from));
    }
  }

  private HarnessTail() {}

  /**
   * Prints a summary per recording.
   *
   * @param args the recordings ({@code .jfr} files), one per harness JVM
   * @throws Exception if a recording cannot be read
   */
  public static void main(String[] args) throws Exception {
    long slowNanos = Long.getLong("slowUs", 300) * 1_000;
    boolean list = Boolean.getBoolean("list");
    for (String file : args) {
      summarize(Path.of(file), slowNanos, list);
    }
  }

  private static void summarize(Path file, long slowNanos, boolean list) throws Exception {
    String peer = "?";
    List<Span> replays = new ArrayList<>();
    List<RecordedEvent> c2 = new ArrayList<>();
    List<Span> c1 = new ArrayList<>();
    List<Span> safepoints = new ArrayList<>();
    List<Span> collections = new ArrayList<>();
    List<RecordedEvent> deopts = new ArrayList<>();
    for (RecordedEvent event : RecordingFile.readAllEvents(file)) {
      switch (event.getEventType().getName()) {
        case "jdk.JVMInformation" -> peer = peerOf(event.getString("javaArguments"));
        case "peers.Op" -> {
          if (event.getBoolean("measured") && "REPLAY".equals(event.getString("expect"))) {
            replays.add(span(event));
          }
        }
        case "jdk.Compilation" -> {
          if (event.getInt("compileLevel") == 4) {
            c2.add(event);
          } else {
            c1.add(span(event));
          }
        }
        case "jdk.SafepointBegin" -> safepoints.add(span(event));
        case "jdk.GarbageCollection" -> collections.add(span(event));
        case "jdk.Deoptimization" -> deopts.add(event);
        default -> {}
      }
    }
    if (replays.isEmpty()) {
      System.out.printf("%s: no measured replays (was the driver patched?)%n", file);
      return;
    }
    replays.sort(Comparator.comparingLong(Span::start));
    long from = replays.get(0).start();
    long to = replays.stream().mapToLong(Span::end).max().orElseThrow();
    List<Span> c2Spans = c2.stream().map(HarnessTail::span).toList();
    long[] sorted = replays.stream().mapToLong(s -> s.end() - s.start()).sorted().toArray();
    long median = sorted[sorted.length / 2];
    double seconds = (to - from) / 1e9;
    // the time the pass spent beyond as many replays at the median: what the tail costs it
    long overMedian = Arrays.stream(sorted).sum() - median * sorted.length;
    System.out.printf(
        "%s %s: %d replays in %.2f s, %.0f ops/s; p50 %.1f, p90 %.1f, p99 %.1f, max %.0f µs;"
            + " %.0f ms over the median in all%n",
        file.getFileName(),
        peer,
        sorted.length,
        seconds,
        sorted.length / seconds,
        micros(median),
        micros(sorted[(int) (sorted.length * 0.9)]),
        micros(sorted[(int) (sorted.length * 0.99)]),
        micros(sorted[sorted.length - 1]),
        overMedian / 1e6);
    System.out.printf(
        "  during the pass: C2 compilations %d (%.0f ms of compiler time), C1 %d (%.0f ms),"
            + " deoptimizations %d, safepoints %d, collections %d%n",
        count(c2Spans, from, to),
        busy(c2Spans, from, to) / 1e6,
        count(c1, from, to),
        busy(c1, from, to) / 1e6,
        deopts.stream().filter(e -> within(e, from, to)).count(),
        count(safepoints, from, to),
        count(collections, from, to));
    int slow = 0;
    int slowOverC2 = 0;
    int allOverC2 = 0;
    int slowOverPause = 0;
    long excess = 0;
    long excessOverC2 = 0;
    for (Span replay : replays) {
      long took = replay.end() - replay.start();
      boolean overC2 = c2Spans.stream().anyMatch(c -> c.overlaps(replay.start(), replay.end()));
      allOverC2 += overC2 ? 1 : 0;
      if (took > slowNanos) {
        slow++;
        excess += took - median;
        if (overC2) {
          slowOverC2++;
          excessOverC2 += took - median;
        }
        if (safepoints.stream().anyMatch(s -> s.overlaps(replay.start(), replay.end()))) {
          slowOverPause++;
        }
      }
    }
    System.out.printf(
        "  replays over %d µs: %d, %.0f ms over the median; %d of them (%.0f ms over the"
            + " median) overlapped a C2 compilation, as did %.0f%% of all replays; %d a safepoint%n",
        slowNanos / 1_000,
        slow,
        excess / 1e6,
        slowOverC2,
        excessOverC2 / 1e6,
        100.0 * allOverC2 / replays.size(),
        slowOverPause);
    Map<String, long[]> byPackage = new TreeMap<>();
    for (RecordedEvent compilation : c2) {
      if (within(compilation, from, to)) {
        long[] entry = byPackage.computeIfAbsent(owner(compilation), k -> new long[2]);
        entry[0]++;
        entry[1] += compilation.getDuration().toNanos();
      }
    }
    StringBuilder packages = new StringBuilder("  C2 compilations by code:");
    byPackage.forEach(
        (name, entry) ->
            packages.append(String.format(" %s %d (%.0f ms);", name, entry[0], entry[1] / 1e6)));
    System.out.println(packages);
    if (list) {
      for (RecordedEvent deopt : deopts) {
        if (within(deopt, from, to)) {
          System.out.printf(
              "    deoptimized %s line %s: %s, %s%n",
              name(deopt.getValue("method")),
              deopt.getValue("lineNumber"),
              deopt.getValue("reason"),
              deopt.getValue("action"));
        }
      }
      for (RecordedEvent compilation : c2) {
        if (within(compilation, from, to)) {
          System.out.printf(
              "    C2 %4d ms %s%n",
              compilation.getDuration().toMillis(), name(compilation.getValue("method")));
        }
      }
    }
  }

  private static String peerOf(String javaArguments) {
    String[] words = javaArguments.split(" ");
    for (int i = 0; i + 1 < words.length; i++) {
      if (words[i].equals("--peer")) {
        return words[i + 1].substring(words[i + 1].lastIndexOf('.') + 1);
      }
    }
    return "?";
  }

  /** The compiled method's code, by its first two package names ({@code io.netty}). */
  private static String owner(RecordedEvent compilation) {
    String type = ((RecordedMethod) compilation.getValue("method")).getType().getName();
    String[] parts = type.split("\\.");
    return parts.length < 3 ? type : parts[0] + "." + parts[1];
  }

  private static String name(RecordedMethod method) {
    String type = method.getType().getName();
    return type.substring(type.lastIndexOf('.') + 1) + "." + method.getName();
  }

  private static Span span(RecordedEvent event) {
    return new Span(nanos(event.getStartTime()), nanos(event.getEndTime()));
  }

  private static boolean within(RecordedEvent event, long from, long to) {
    long at = nanos(event.getStartTime());
    return at >= from && at <= to;
  }

  private static long count(List<Span> spans, long from, long to) {
    return spans.stream().filter(s -> s.overlaps(from, to)).count();
  }

  private static long busy(List<Span> spans, long from, long to) {
    return spans.stream().mapToLong(s -> s.overlap(from, to)).sum();
  }

  private static long nanos(Instant instant) {
    return instant.getEpochSecond() * 1_000_000_000L + instant.getNano();
  }

  private static double micros(long nanos) {
    return nanos / 1e3;
  }
}
