package dev.idempotency.tck;

import dev.idempotency.spi.KeyStore;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The second JVM of {@link SharedKeyStoreContract}: opens the store with a {@link KeyStoreFactory},
 * says {@code READY}, waits for {@code GO} on standard input, races for the keys and writes the
 * keys it won to a file. Its standard input and output are the handshake with the parent test, not
 * a log: the one line it prints is {@code READY}.
 *
 * <p>Arguments: factory class, factory config, keys file, threads, result file.
 */
public final class KeyStoreRaceMain {

  private KeyStoreRaceMain() {}

  /**
   * Runs the race. Any failure is printed and ends the JVM with exit code 1: a store's non-daemon
   * threads would otherwise keep it alive, and the parent would wait for {@code READY}.
   *
   * @param args factory class, config, keys file, threads, result file
   */
  public static void main(String[] args) {
    try {
      race(args);
    } catch (Throwable failure) {
      failure.printStackTrace();
      System.exit(1);
    }
  }

  private static void race(String[] args) throws Exception {
    KeyStoreFactory factory =
        (KeyStoreFactory) Class.forName(args[0]).getDeclaredConstructor().newInstance();
    KeyStore store = factory.open(args[1]);
    List<String> keyIds = Files.readAllLines(Path.of(args[2]), StandardCharsets.UTF_8);
    int threads = Integer.parseInt(args[3]);
    KeyStoreRace race = new KeyStoreRace(store, keyIds, threads, false);
    race.warmUp();
    System.out.println("READY");
    System.out.flush();
    BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    if (!"GO".equals(in.readLine())) {
      throw new IllegalStateException("expected GO");
    }
    KeyStoreRace.Result result = race.run();
    List<String> lines = new ArrayList<>();
    lines.add("CLAIMS " + result.claims());
    result.won().forEach(keyId -> lines.add("WON " + keyId));
    Files.write(Path.of(args[4]), lines, StandardCharsets.UTF_8);
    System.exit(0);
  }
}
