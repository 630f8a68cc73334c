package dev.idempotency.examples.outbox;

import dev.idempotency.examples.providers.FakeSmsProvider;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.PropertySource;
import org.springframework.scheduling.annotation.EnableScheduling;

/**
 * The outbox pattern end to end (docs/outbox.md): {@code POST /notify} enqueues a notification row
 * and the request's key in one transaction and answers with the row's id ({@link Notifications},
 * {@link Outbox}); a relay polls the outbox and sends each row through the usual guard, keyed by
 * the row's id ({@link OutboxRelay}).
 *
 * <ul>
 *   <li>The enqueue is exactly-once per key within the window, crashes included: the key's record
 *       and the row commit or roll back together.
 *   <li>The provider call keeps the rare crash duplicate of the usual mode: a relay that dies after
 *       the provider accepted a message and before the outcome was recorded sends it once more
 *       after the lease, with the same provider key, which a deduplicating provider absorbs.
 * </ul>
 *
 * <p>Run it on PostgreSQL with {@code mvn -q -pl examples-spring-boot -am compile exec:java
 * -Dexamples.skipDemo=true -Ddemo.main=dev.idempotency.examples.outbox.OutboxApplication
 * -Dexec.args="--spring.datasource.url=jdbc:postgresql://localhost/notify?user=app"}; without a URL
 * it runs on an in-memory H2.
 */
@SpringBootApplication
@PropertySource("classpath:outbox.properties")
public class OutboxApplication {

  /**
   * The SMS provider the relay sends through.
   *
   * @return the provider
   */
  @Bean
  FakeSmsProvider sms() {
    return new FakeSmsProvider();
  }

  /** Runs the relay on a schedule unless {@code outbox.relay.enabled=false}. */
  @Configuration(proxyBeanMethods = false)
  @EnableScheduling
  @ConditionalOnProperty(name = "outbox.relay.enabled", matchIfMissing = true)
  static class RelaySchedule {}

  /**
   * Starts the service.
   *
   * @param args Spring Boot arguments, such as {@code --spring.datasource.url=...}
   */
  public static void main(String[] args) {
    SpringApplication.run(OutboxApplication.class, args);
  }
}
