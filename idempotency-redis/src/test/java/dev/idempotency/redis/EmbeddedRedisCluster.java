package dev.idempotency.redis;

import io.lettuce.core.Range;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.output.StatusOutput;
import io.lettuce.core.protocol.CommandArgs;
import io.lettuce.core.protocol.CommandType;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.stream.Stream;
import redis.embedded.RedisServer;

/**
 * A real three-master Redis Cluster from the embedded redis-server binary: each node owns a third
 * of the slots, joined with {@code CLUSTER MEET} (with the bus port), and ready once every node
 * reports {@code cluster_state:ok}.
 */
public final class EmbeddedRedisCluster implements AutoCloseable {

  public static final int NODES = 3;

  public final List<Integer> ports = new ArrayList<>();
  private final List<RedisServer> servers = new ArrayList<>();
  private final Path dir;

  public EmbeddedRedisCluster() throws Exception {
    dir = Files.createTempDirectory("idem-redis-cluster");
    List<Integer> busPorts = new ArrayList<>();
    for (int i = 0; i < NODES; i++) {
      int port = FreePorts.next();
      int busPort = FreePorts.next();
      ports.add(port);
      busPorts.add(busPort);
      RedisServer server =
          RedisServer.builder()
              .port(port)
              .setting("bind 127.0.0.1")
              .setting("save \"\"")
              .setting("cluster-enabled yes")
              .setting("cluster-config-file " + dir.resolve("nodes-" + port + ".conf"))
              .setting("cluster-node-timeout 2000")
              .setting("cluster-port " + busPort)
              .build();
      server.start();
      servers.add(server);
    }
    int slotsPerNode = 16384 / NODES;
    for (int i = 0; i < NODES; i++) {
      int from = i * slotsPerNode;
      int to = i == NODES - 1 ? 16383 : from + slotsPerNode - 1;
      int self = i;
      onNode(
          ports.get(i),
          node -> {
            node.clusterAddSlotsRange(Range.create(from, to));
            for (int j = 0; j < NODES; j++) {
              if (j != self) {
                node.dispatch(
                    CommandType.CLUSTER,
                    new StatusOutput<>(StringCodec.UTF8),
                    new CommandArgs<>(StringCodec.UTF8)
                        .add("MEET")
                        .add("127.0.0.1")
                        .add(ports.get(j))
                        .add(busPorts.get(j)));
              }
            }
            return null;
          });
    }
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (!allOk()) {
      if (System.nanoTime() > deadline) {
        close();
        throw new IllegalStateException("the cluster did not reach cluster_state:ok in 60 s");
      }
      Thread.sleep(100);
    }
  }

  private boolean allOk() {
    for (int port : ports) {
      String info = onNode(port, RedisCommands::clusterInfo);
      if (!info.contains("cluster_state:ok") || !info.contains("cluster_known_nodes:" + NODES)) {
        return false;
      }
    }
    return true;
  }

  /** Runs commands on one node over a connection of its own. */
  public static <R> R onNode(int port, Function<RedisCommands<String, String>, R> work) {
    RedisClient client = RedisClient.create(RedisURI.create("redis://127.0.0.1:" + port));
    try (StatefulRedisConnection<String, String> connection = client.connect()) {
      return work.apply(connection.sync());
    } finally {
      client.shutdown();
    }
  }

  public List<RedisURI> uris() {
    return ports.stream().map(port -> RedisURI.create("redis://127.0.0.1:" + port)).toList();
  }

  @Override
  public void close() throws IOException {
    for (RedisServer server : servers) {
      server.stop();
    }
    try (Stream<Path> files = Files.walk(dir)) {
      files.sorted(Comparator.reverseOrder()).forEach(path -> path.toFile().delete());
    }
  }
}
