package dev.idempotency.examples.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyKey;
import dev.idempotency.examples.providers.FakeEmailProvider;
import dev.idempotency.examples.providers.FakeProvider.Message;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.test.EmbeddedKafkaKraftBroker;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The order-shipped e-mails over a real Kafka broker (KRaft, in this JVM): an event published three
 * times, and one whose first send fails, each e-mail the customer once, with the order's provider
 * key.
 */
@SpringBootTest(
    properties = {
      "notify.kafka.enabled=true",
      "spring.kafka.consumer.group-id=order-shipped-email",
      "spring.kafka.consumer.auto-offset-reset=earliest",
      "logging.level.kafka=WARN",
      "logging.level.org.apache.kafka=WARN",
      "logging.level.state.change.logger=WARN"
    })
class OrderShippedMailerTest {

  static final EmbeddedKafkaKraftBroker KAFKA = start();

  static EmbeddedKafkaKraftBroker start() {
    EmbeddedKafkaKraftBroker broker = new EmbeddedKafkaKraftBroker(1, 1, "order-shipped");
    broker.afterPropertiesSet();
    return broker;
  }

  @DynamicPropertySource
  static void kafka(DynamicPropertyRegistry registry) {
    registry.add("spring.kafka.bootstrap-servers", KAFKA::getBrokersAsString);
  }

  @AfterAll
  static void stopKafka() {
    KAFKA.destroy();
  }

  @Autowired KafkaTemplate<String, String> kafka;
  @Autowired FakeEmailProvider email;

  static String event(String orderId) {
    return "{\"userId\":\"user_42\",\"orderId\":\""
        + orderId
        + "\",\"email\":\"ada@example.com\",\"createdAt\":\"2026-11-30T10:15:30Z\"}";
  }

  List<Message> emailsFor(String orderId) {
    return email.accepted().stream()
        .filter(message -> message.content().startsWith("Your order " + orderId + " shipped"))
        .toList();
  }

  void awaitEmails(String orderId, int count) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
    while (emailsFor(orderId).size() < count) {
      assertThat(System.nanoTime()).as("the e-mail for " + orderId).isLessThan(deadline);
      Thread.sleep(50);
    }
  }

  @Test
  void anEventPublishedThreeTimesEmailsTheCustomerOnce() throws Exception {
    String order = "order-" + UUID.randomUUID();
    String marker = "order-" + UUID.randomUUID();
    for (int i = 0; i < 3; i++) {
      kafka.send("order-shipped", event(order)).get(30, TimeUnit.SECONDS);
    }
    kafka.send("order-shipped", event(marker)).get(30, TimeUnit.SECONDS);

    awaitEmails(marker, 1); // one partition: every earlier delivery was handled before it
    assertThat(emailsFor(order)).hasSize(1);
    assertThat(emailsFor(order).get(0).idempotencyKey())
        .isEqualTo(IdempotencyKey.providerKey(IdempotencyKey.of("order-shipped-email", order)));
  }

  @Test
  void aSendThatFailsIsDeliveredAgainByKafkaAndEmailedOnce() throws Exception {
    String order = "order-" + UUID.randomUUID();
    int requestsBefore = email.requests();
    email.failNext(1);
    kafka.send("order-shipped", event(order)).get(30, TimeUnit.SECONDS);
    kafka.send("order-shipped", event(order)).get(30, TimeUnit.SECONDS);

    awaitEmails(order, 1);
    String marker = "order-" + UUID.randomUUID();
    kafka.send("order-shipped", event(marker)).get(30, TimeUnit.SECONDS);
    awaitEmails(marker, 1); // one partition: every earlier delivery was handled before it
    assertThat(emailsFor(order)).hasSize(1);
    assertThat(email.requests() - requestsBefore)
        .as("the failed request, the one Kafka's redelivery made, then the marker's")
        .isEqualTo(3);
  }
}
