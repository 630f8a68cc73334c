package dev.idempotency.redis;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Counts the commands clients send to Redis nodes, as the servers log them with {@code MONITOR}.
 * {@code INFO commandstats} cannot tell a client's {@code SET} from one a script runs; the monitor
 * feed can ({@code [0 lua]} instead of a client address), so this counts round trips exactly.
 */
final class ClientCommands implements AutoCloseable {

  private static final Pattern LINE =
      Pattern.compile("^\\+[0-9.]+ \\[\\d+ ([^\\]]+)\\] \"([^\"]+)\"");

  /** Commands the test itself or the client library send, not the store. */
  private static final Set<String> NOT_THE_STORE =
      Set.of("echo", "info", "config", "cluster", "command", "ping", "hello", "client");

  private final List<Node> nodes = new ArrayList<>();

  private ClientCommands(List<Integer> ports) {
    for (int port : ports) {
      nodes.add(new Node(port));
    }
  }

  /** Starts monitoring the nodes at these ports on the loopback address. */
  static ClientCommands watch(List<Integer> ports) {
    return new ClientCommands(ports);
  }

  /**
   * Runs the operation and returns, per command name in lower case, how many clients sent to all
   * watched nodes while it ran.
   */
  Map<String, Long> during(Runnable operation) {
    String id = UUID.randomUUID().toString();
    for (Node node : nodes) {
      node.echo("start-" + id);
    }
    operation.run();
    for (Node node : nodes) {
      node.echo("end-" + id);
    }
    Map<String, Long> counts = new TreeMap<>();
    for (Node node : nodes) {
      node.countBetween("start-" + id, "end-" + id, counts);
    }
    return counts;
  }

  /** The sum of {@link #during} over all commands. */
  static long total(Map<String, Long> counts) {
    return counts.values().stream().mapToLong(Long::longValue).sum();
  }

  @Override
  public void close() {
    for (Node node : nodes) {
      node.close();
    }
  }

  /** One node: a monitor connection feeding a queue, and a connection for markers. */
  private static final class Node {
    private final Socket monitor;
    private final Socket markers;
    private final BufferedReader markerReplies;
    private final BlockingQueue<String> lines = new LinkedBlockingQueue<>();

    Node(int port) {
      try {
        monitor = new Socket("127.0.0.1", port);
        markers = new Socket("127.0.0.1", port);
        markerReplies =
            new BufferedReader(
                new InputStreamReader(markers.getInputStream(), StandardCharsets.ISO_8859_1));
        BufferedReader feed =
            new BufferedReader(
                new InputStreamReader(monitor.getInputStream(), StandardCharsets.ISO_8859_1));
        monitor.getOutputStream().write("MONITOR\r\n".getBytes(StandardCharsets.US_ASCII));
        monitor.getOutputStream().flush();
        if (!"+OK".equals(feed.readLine())) {
          throw new IllegalStateException("MONITOR refused on port " + port);
        }
        Thread reader =
            new Thread(
                () -> {
                  try {
                    for (String line; (line = feed.readLine()) != null; ) {
                      lines.add(line);
                    }
                  } catch (IOException e) {
                    // closed
                  }
                },
                "monitor-" + port);
        reader.setDaemon(true);
        reader.start();
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }

    void echo(String marker) {
      try {
        OutputStream out = markers.getOutputStream();
        out.write(("ECHO " + marker + "\r\n").getBytes(StandardCharsets.US_ASCII));
        out.flush();
        markerReplies.readLine(); // $length
        markerReplies.readLine(); // the marker
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }

    void countBetween(String start, String end, Map<String, Long> counts) {
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      boolean counting = false;
      while (true) {
        String line;
        try {
          line = lines.poll(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new IllegalStateException(e);
        }
        if (line == null) {
          throw new AssertionError("the monitor feed never showed " + (counting ? end : start));
        }
        if (line.contains("\"" + start + "\"")) {
          counting = true;
          continue;
        }
        if (line.contains("\"" + end + "\"")) {
          return;
        }
        Matcher m = LINE.matcher(line);
        if (!counting || !m.find() || m.group(1).equals("lua")) {
          continue;
        }
        String command = m.group(2).toLowerCase(java.util.Locale.ROOT);
        if (!NOT_THE_STORE.contains(command)) {
          counts.merge(command, 1L, Long::sum);
        }
      }
    }

    void close() {
      try {
        monitor.close();
        markers.close();
      } catch (IOException e) {
        // best effort
      }
    }
  }
}
