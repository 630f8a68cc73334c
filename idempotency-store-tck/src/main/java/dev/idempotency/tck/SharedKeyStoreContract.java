package dev.idempotency.tck;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The contract for stores shared between processes: everything in {@link KeyStoreContract}, plus a
 * second JVM racing this one for the same keys.
 */
public abstract class SharedKeyStoreContract extends KeyStoreContract {

  /** Keys in the cross-process race. */
  protected static final int RACE_KEYS = 600;

  /** Threads per process in the race. */
  protected static final int RACE_THREADS = 4;

  /**
   * The factory the second JVM uses to open a store on the same backend.
   *
   * @return a class with a public no-argument constructor
   */
  protected abstract Class<? extends KeyStoreFactory> factoryClass();

  /**
   * The configuration the factory receives in the second JVM.
   *
   * @return a JDBC URL, a Redis URI, ...
   */
  protected abstract String factoryConfig();

  @Test
  void secondProcessRacingForTheSameKeysWinsEachKeyOnlyOnce(@TempDir Path dir) throws Exception {
    List<String> keyIds = new ArrayList<>();
    for (int i = 0; i < RACE_KEYS; i++) {
      keyIds.add(newKeyId());
    }
    Path keysFile = dir.resolve("keys.txt");
    Path resultFile = dir.resolve("child-result.txt");
    Files.write(keysFile, keyIds, StandardCharsets.UTF_8);

    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    Process child =
        new ProcessBuilder(
                java,
                "-cp",
                System.getProperty("java.class.path"),
                KeyStoreRaceMain.class.getName(),
                factoryClass().getName(),
                factoryConfig(),
                keysFile.toString(),
                Integer.toString(RACE_THREADS),
                resultFile.toString())
            .redirectError(dir.resolve("child-stderr.txt").toFile())
            .start();
    try {
      BufferedReader childOut =
          new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8));
      CompletableFuture<String> ready = CompletableFuture.supplyAsync(() -> readLine(childOut));
      assertThat(ready.get(180, TimeUnit.SECONDS))
          .as("child JVM start-up; stderr: %s", stderr(dir))
          .isEqualTo("READY");

      KeyStoreRace race = new KeyStoreRace(store(), keyIds, RACE_THREADS, true);
      race.warmUp();
      Writer childIn = new OutputStreamWriter(child.getOutputStream(), StandardCharsets.UTF_8);
      childIn.write("GO\n");
      childIn.flush();
      CompletableFuture<KeyStoreRace.Result> parent =
          CompletableFuture.supplyAsync(
              () -> {
                try {
                  return race.run();
                } catch (Exception e) {
                  throw new IllegalStateException(e);
                }
              });

      KeyStoreRace.Result parentResult = parent.get(5, TimeUnit.MINUTES);
      assertThat(child.waitFor(5, TimeUnit.MINUTES)).as("child finished").isTrue();
      assertThat(child.exitValue()).as("child exit code; stderr: %s", stderr(dir)).isZero();

      Set<String> childWon = new HashSet<>();
      int childClaims = -1;
      for (String line : Files.readAllLines(resultFile, StandardCharsets.UTF_8)) {
        if (line.startsWith("CLAIMS ")) {
          childClaims = Integer.parseInt(line.substring(7));
        } else if (line.startsWith("WON ")) {
          childWon.add(line.substring(4));
        }
      }
      assertThat(childClaims).as("claims made by the child").isEqualTo(RACE_KEYS * RACE_THREADS);
      assertThat(parentResult.claims()).isEqualTo(RACE_KEYS * RACE_THREADS);
      Set<String> both = new HashSet<>(parentResult.won());
      both.retainAll(childWon);
      assertThat(both).as("keys claimed by both processes").isEmpty();
      Set<String> all = new HashSet<>(parentResult.won());
      all.addAll(childWon);
      assertThat(all)
          .as(
              "every key claimed once (parent won %d, child won %d)",
              parentResult.won().size(), childWon.size())
          .containsExactlyInAnyOrderElementsOf(keyIds);
    } finally {
      child.destroyForcibly();
    }
  }

  private static String readLine(BufferedReader reader) {
    try {
      return reader.readLine();
    } catch (java.io.IOException e) {
      throw new IllegalStateException(e);
    }
  }

  private static String stderr(Path dir) {
    try {
      File file = dir.resolve("child-stderr.txt").toFile();
      return file.exists() ? Files.readString(file.toPath()) : "";
    } catch (java.io.IOException e) {
      return "unreadable: " + e;
    }
  }
}
