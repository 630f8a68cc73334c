package dev.idempotency.examples.spring;

import dev.idempotency.examples.providers.FakeEmailProvider;
import dev.idempotency.examples.providers.FakePushProvider;
import dev.idempotency.examples.providers.FakeSmsProvider;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.annotation.Bean;

/**
 * The notify service on Spring Boot with the idempotency starter: nothing configured but the
 * providers. The starter finds the store itself: an in-memory H2 database here (H2 is on the
 * classpath), PostgreSQL with {@code --spring.datasource.url=jdbc:postgresql://...}, Redis with
 * {@code --idempotency.store=redis --spring.data.redis.host=...}.
 *
 * <p>Run it with {@code mvn -q -pl examples-spring-boot -am compile exec:java
 * -Dexamples.skipDemo=true}; {@code --sms-delay-ms=5000} (as {@code
 * -Dexec.args="--sms-delay-ms=5000"}) makes the SMS provider slow, to see a 409. With {@code
 * --notify.kafka.enabled=true --spring.kafka.bootstrap-servers=host:9092} it also e-mails each
 * shipped order of the {@code order-shipped} topic once ({@link OrderShippedMailer}).
 */
@SpringBootApplication
public class NotifyApplication {

  /**
   * The SMS provider, slowed down by {@code sms-delay-ms}.
   *
   * @param delayMillis how long each send takes
   * @return the provider
   */
  @Bean
  FakeSmsProvider sms(
      @org.springframework.beans.factory.annotation.Value("${sms-delay-ms:0}") long delayMillis) {
    FakeSmsProvider sms = new FakeSmsProvider();
    sms.delay(java.time.Duration.ofMillis(delayMillis));
    return sms;
  }

  @Bean
  FakeEmailProvider email() {
    return new FakeEmailProvider();
  }

  @Bean
  FakePushProvider push() {
    return new FakePushProvider();
  }

  /**
   * Kafka records as JSON, converted to the listener's parameter type ({@code OrderShipped}).
   *
   * @return the converter Spring Boot gives the listener container factory
   */
  @Bean
  org.springframework.kafka.support.converter.RecordMessageConverter kafkaJson() {
    return new org.springframework.kafka.support.converter.JacksonJsonMessageConverter();
  }

  /**
   * Starts the service.
   *
   * @param args Spring Boot arguments, such as {@code --server.port=8080}
   */
  public static void main(String[] args) {
    SpringApplication.run(NotifyApplication.class, args);
  }
}
