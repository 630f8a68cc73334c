package dev.idempotency.reliability;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.api.parallel.Isolated;

/**
 * Three JVM processes with 16 threads each over the same 10,000 keys (-Dreliability.keys=N for
 * more), in random order, with 10% of the keys repeated five more times in every process: exactly
 * one send per key, and every caller of a key gets the same result. On real PostgreSQL, MariaDB,
 * Redis and a three-master Redis Cluster.
 *
 * <p>{@code @Isolated}: its processes load both cores; no other test class runs beside it.
 */
@Isolated
class ManyProcessesTest {

  static final int PROCESSES = 3;
  static final int THREADS = 16;
  static final int KEYS = Integer.getInteger("reliability.keys", 10_000);

  @Test
  void postgresql(@TempDir Path dir) throws Exception {
    SharedStores.postgresql(spec -> race("postgresql", spec, dir));
  }

  @Test
  void mariadb(@TempDir Path dir) throws Exception {
    SharedStores.mariadb(spec -> race("mariadb", spec, dir));
  }

  @Test
  void redis(@TempDir Path dir) throws Exception {
    SharedStores.redis(spec -> race("redis", spec, dir));
  }

  @Test
  void redisCluster(@TempDir Path dir) throws Exception {
    SharedStores.redisCluster(spec -> race("redis cluster", spec, dir));
  }

  private void race(String name, String spec, Path dir) throws Exception {
    List<String> keys = new ArrayList<>();
    String run = UUID.randomUUID().toString().substring(0, 8);
    for (int i = 0; i < KEYS; i++) {
      keys.add("many:" + run + ":" + i);
    }
    Path keysFile = dir.resolve("keys.txt");
    Files.write(keysFile, keys, StandardCharsets.UTF_8);
    // Create the schema once, before the race.
    Stores.open(spec, 1);

    long start = System.nanoTime();
    List<ChildJvm> children = new ArrayList<>();
    List<Path> outputs = new ArrayList<>();
    try {
      for (int p = 0; p < PROCESSES; p++) {
        Path out = dir.resolve("out-" + p + ".txt");
        outputs.add(out);
        children.add(
            new ChildJvm(
                dir,
                "load",
                spec,
                keysFile.toString(),
                Integer.toString(THREADS),
                out.toString(),
                Integer.toString(p)));
      }
      for (ChildJvm child : children) {
        child.await("READY", 180);
      }
      for (ChildJvm child : children) {
        Writer in = new OutputStreamWriter(child.process.getOutputStream(), StandardCharsets.UTF_8);
        in.write("GO\n");
        in.flush();
      }
      for (ChildJvm child : children) {
        child.awaitExit(600);
      }
    } finally {
      for (ChildJvm child : children) {
        child.kill();
      }
    }
    long millis = (System.nanoTime() - start) / 1_000_000;

    Map<String, List<String>> sent = new HashMap<>();
    Map<String, Set<String>> returned = new HashMap<>();
    long calls = 0;
    for (Path out : outputs) {
      for (String line : Files.readAllLines(out, StandardCharsets.UTF_8)) {
        String[] parts = line.split(" ");
        if (parts[0].equals("S")) {
          sent.computeIfAbsent(parts[1], k -> new ArrayList<>()).add(parts[2]);
        } else {
          calls++;
          returned.computeIfAbsent(parts[1], k -> new HashSet<>()).add(parts[2]);
        }
      }
    }
    long perProcess = KEYS + (KEYS / 10) * 5L;
    System.out.printf(
        "%s: %d processes x %d threads, %d keys, %d calls, %d sends, %d ms%n",
        name,
        PROCESSES,
        THREADS,
        KEYS,
        calls,
        sent.values().stream().mapToInt(List::size).sum(),
        millis);

    assertThat(calls).as("every call returned").isEqualTo(perProcess * PROCESSES);
    assertThat(sent.keySet()).as("every key sent").hasSize(KEYS);
    assertThat(sent.values())
        .as("exactly one send per key")
        .allSatisfy(s -> assertThat(s).hasSize(1));
    for (String key : keys) {
      assertThat(returned.get(key))
          .as("every caller of %s got the one sent result", key)
          .containsExactly(sent.get(key).get(0));
    }
  }
}
