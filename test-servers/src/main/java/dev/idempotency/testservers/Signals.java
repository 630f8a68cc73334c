package dev.idempotency.testservers;

import java.util.concurrent.TimeUnit;

/**
 * Stops and continues a server process by its id (SIGSTOP, SIGCONT), as a stall would: a stopped
 * server holds its connections and answers nothing until it is continued.
 */
public final class Signals {
  private Signals() {}

  /** Sends SIGSTOP to {@code pid}. */
  public static void stop(long pid) throws InterruptedException {
    send("STOP", pid);
  }

  /** Sends SIGCONT to {@code pid}. */
  public static void resume(long pid) throws InterruptedException {
    send("CONT", pid);
  }

  private static void send(String name, long pid) throws InterruptedException {
    try {
      Process kill = new ProcessBuilder("kill", "-" + name, Long.toString(pid)).start();
      if (!kill.waitFor(30, TimeUnit.SECONDS) || kill.exitValue() != 0) {
        throw new IllegalStateException("kill -" + name + " " + pid + " failed");
      }
    } catch (java.io.IOException e) {
      throw new IllegalStateException("kill -" + name + " " + pid + " could not run", e);
    }
  }
}
