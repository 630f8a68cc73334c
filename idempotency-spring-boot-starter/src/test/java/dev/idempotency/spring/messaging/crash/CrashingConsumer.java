package dev.idempotency.spring.messaging.crash;

import dev.idempotency.SendContext;
import dev.idempotency.spring.messaging.IdempotentDelivery;
import dev.idempotency.spring.messaging.IdempotentListener;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.kafka.annotation.KafkaListener;

/**
 * The consumer process of {@link ConsumerCrashTest}: a Spring Boot application with a Kafka batch
 * listener on the Redis store, whose "provider" appends each send (provider key, attempt, event) to
 * a file, flushed to disk before it returns, as a provider's own record of what it accepted.
 *
 * <p>Arguments: {@code crash|finish}, Kafka's bootstrap servers, the Redis port, the provider's
 * file, and (for {@code crash}) after how many sends of its first batch it stops and prints {@code
 * SENT n}: it then hangs until the parent kills it, between the provider's acceptance and the
 * record.
 */
@SpringBootConfiguration(proxyBeanMethods = false)
@EnableAutoConfiguration
public class CrashingConsumer {

  static final String TOPIC = "idem.crash";
  static final String LISTENER = "crash-batch";

  /** The batch listener. */
  public static class Listener {
    private final Path providerLog;
    private final int crashAfter;
    private int sent;

    Listener(Path providerLog, int crashAfter) {
      this.providerLog = providerLog;
      this.crashAfter = crashAfter;
    }

    @KafkaListener(id = LISTENER, topics = TOPIC, batch = "true")
    @IdempotentListener(name = LISTENER, key = "#payload")
    public void onBatch(List<String> events) throws InterruptedException {
      for (String event : events) {
        SendContext context = IdempotentDelivery.context(event);
        accept(context.providerKey() + " " + context.attempt() + " " + event);
        sent++;
        if (sent == crashAfter) {
          System.out.println("SENT " + sent);
          System.out.flush();
          new CountDownLatch(1).await(); // hang until killed
        }
      }
    }

    /** The provider accepts a message: its record reaches the disk before it answers. */
    private synchronized void accept(String line) {
      try (FileChannel file =
          FileChannel.open(
              providerLog,
              StandardOpenOption.CREATE,
              StandardOpenOption.WRITE,
              StandardOpenOption.APPEND)) {
        file.write(java.nio.ByteBuffer.wrap((line + "\n").getBytes(StandardCharsets.UTF_8)));
        file.force(true);
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
  }

  @Bean
  Listener listener(org.springframework.core.env.Environment environment) {
    return new Listener(
        Path.of(environment.getRequiredProperty("crash.provider-log")),
        environment.getProperty("crash.after", Integer.class, 0));
  }

  public static void main(String[] args) {
    boolean crash = args[0].equals("crash");
    SpringApplication application = new SpringApplication(CrashingConsumer.class);
    application.setWebApplicationType(org.springframework.boot.WebApplicationType.NONE);
    application.run(
        "--spring.kafka.bootstrap-servers=" + args[1],
        "--spring.kafka.consumer.group-id=crash-group",
        "--spring.kafka.consumer.auto-offset-reset=earliest",
        "--spring.kafka.consumer.properties.session.timeout.ms=6000",
        // static membership, one instance id for both processes: the second replaces the killed
        // first in the group at once, instead of waiting out its session (the broker's shortest
        // session is 6 s, group.min.session.timeout.ms)
        "--spring.kafka.consumer.properties.group.instance.id=crash-consumer",
        "--spring.kafka.consumer.properties.heartbeat.interval.ms=1000",
        "--idempotency.store=redis",
        "--spring.data.redis.host=127.0.0.1",
        "--spring.data.redis.port=" + args[2],
        "--idempotency.lease=3s",
        "--idempotency.in-flight-wait=100ms",
        "--idempotency.messaging.back-off.initial=200ms",
        "--idempotency.messaging.back-off.max=1s",
        "--crash.provider-log=" + args[3],
        "--crash.after=" + (crash ? args[4] : "0"),
        "--spring.main.banner-mode=off",
        "--logging.level.root=WARN");
    System.out.println("STARTED");
    System.out.flush();
  }
}
