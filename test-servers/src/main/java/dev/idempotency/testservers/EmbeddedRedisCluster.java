package dev.idempotency.testservers;

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
 * reports {@code cluster_state:ok}. Optionally a fourth node replicates the first master.
 */
public final class EmbeddedRedisCluster implements AutoCloseable {

  public static final int NODES = 3;

  /** The masters' ports, in slot order. */
  public final List<Integer> ports = new ArrayList<>();

  /** The port of the replica of the first master, or 0 without one. */
  public final int replicaPort;

  private final List<RedisServer> servers = new ArrayList<>();
  private final Path dir;

  public EmbeddedRedisCluster() throws Exception {
    this(false);
  }

  /**
   * Starts the cluster.
   *
   * @param replicaOfFirstMaster whether a fourth node replicates the first master
   */
  public EmbeddedRedisCluster(boolean replicaOfFirstMaster) throws Exception {
    dir = Files.createTempDirectory("idem-redis-cluster");
    List<Integer> busPorts = new ArrayList<>();
    for (int i = 0; i < NODES; i++) {
      int port = FreePorts.next();
      int busPort = FreePorts.next();
      ports.add(port);
      busPorts.add(busPort);
      servers.add(startNode(port, busPort));
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
                meet(node, ports.get(j), busPorts.get(j));
              }
            }
            return null;
          });
    }
    awaitOrClose(() -> allOk(NODES), "cluster_state:ok on every master");
    if (!replicaOfFirstMaster) {
      replicaPort = 0;
      return;
    }
    replicaPort = FreePorts.next();
    int replicaBusPort = FreePorts.next();
    servers.add(startNode(replicaPort, replicaBusPort));
    onNode(replicaPort, node -> meet(node, ports.get(0), busPorts.get(0)));
    String firstMaster = onNode(ports.get(0), RedisCommands::clusterMyId);
    awaitOrClose(
        () -> onNode(replicaPort, RedisCommands::clusterNodes).contains(firstMaster),
        "the replica to learn of the first master");
    onNode(replicaPort, node -> node.clusterReplicate(firstMaster));
    awaitOrClose(
        () ->
            allOk(NODES + 1)
                && onNode(ports.get(0), node -> node.info("replication"))
                    .contains("connected_slaves:1")
                && onNode(replicaPort, node -> node.info("replication"))
                    .contains("master_link_status:up"),
        "the replica to sync with the first master");
  }

  /**
   * {@code CLUSTER MEET ip port busport}, sent raw: Lettuce's {@code clusterMeet} has no bus-port
   * argument, and without it nodes on high ports never join.
   */
  private static String meet(RedisCommands<String, String> node, int port, int busPort) {
    return node.dispatch(
        CommandType.CLUSTER,
        new StatusOutput<>(StringCodec.UTF8),
        new CommandArgs<>(StringCodec.UTF8).add("MEET").add("127.0.0.1").add(port).add(busPort));
  }

  private RedisServer startNode(int port, int busPort) {
    RedisServer server =
        RedisServer.builder()
            .redisExecProvider(RedisBinary.provider())
            .port(port)
            .setting("bind 127.0.0.1")
            .setting("save \"\"")
            .setting("cluster-enabled yes")
            .setting("cluster-config-file " + dir.resolve("nodes-" + port + ".conf"))
            .setting("cluster-node-timeout 2000")
            .setting("cluster-port " + busPort)
            .build();
    RedisBinary.start(server);
    return server;
  }

  private void awaitOrClose(java.util.function.BooleanSupplier condition, String what)
      throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        close();
        throw new IllegalStateException("timed out after 60 s waiting for " + what);
      }
      Thread.sleep(100);
    }
  }

  private boolean allOk(int nodes) {
    for (int port : ports) {
      String info = onNode(port, RedisCommands::clusterInfo);
      if (!info.contains("cluster_state:ok") || !info.contains("cluster_known_nodes:" + nodes)) {
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
