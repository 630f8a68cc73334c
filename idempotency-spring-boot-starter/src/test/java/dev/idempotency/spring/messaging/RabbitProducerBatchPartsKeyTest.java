package dev.idempotency.spring.messaging;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.Idempotent;
import java.lang.reflect.Method;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.core.MessageProperties;
import org.springframework.messaging.Message;
import org.springframework.messaging.handler.annotation.Header;
import org.springframework.messaging.handler.annotation.Headers;
import org.springframework.messaging.handler.annotation.Payload;

/**
 * Which guarded RabbitMQ listeners read their key from the payload only ({@code
 * RabbitProducerBatchParts.keyedByPayload}): the parts after the first of a producer's batch carry
 * the first message's headers, so any other listener has them rejected, never sent as the first's
 * replay. Payload-keyed listeners are left as they are.
 */
class RabbitProducerBatchPartsKeyTest {

  record Order(String orderId) {}

  interface HeaderKeyed {
    void headerOnTheInterface(String event, @Header("Idempotency-Key") String key);
  }

  @SuppressWarnings("unused")
  static class Listeners implements HeaderKeyed {
    @Override
    @IdempotentListener(key = "#p1")
    public void headerOnTheInterface(String event, String key) {}

    @IdempotentListener(key = "#payload")
    public void payload(String event) {}

    @IdempotentListener(key = "orderId")
    public void payloadProperty(Order order) {}

    @IdempotentListener(key = "#p0.orderId + '-' + #order.orderId")
    public void payloadParameters(Order order) {}

    @IdempotentListener(key = "T(java.util.Objects).hash(#p0, #payload)")
    public void typeReference(@Payload String event, MessageProperties ignored) {}

    @IdempotentListener(key = "#p1")
    public void headerParameter(String event, @Header("Idempotency-Key") String key) {}

    @IdempotentListener(key = "#key")
    public void headerParameterByName(String event, @Header("Idempotency-Key") String key) {}

    @IdempotentListener(key = "#p1['Idempotency-Key']")
    public void headersParameter(String event, @Headers Map<String, Object> headers) {}

    @IdempotentListener(key = "#headers['Idempotency-Key']")
    public void headersVariable(String event) {}

    @IdempotentListener
    public void defaultHeader(String event) {}

    @IdempotentListener(key = "#p0.headers['Idempotency-Key']")
    public void messageParameter(Message<String> message) {}

    @IdempotentListener(key = "headers['Idempotency-Key']")
    public void messageRoot(Message<String> message) {}

    @IdempotentListener(key = "#root.headers['Idempotency-Key']")
    public void messageRootVariable(Message<String> message) {}

    @IdempotentListener(key = "#p1.headers['Idempotency-Key']")
    public void amqpMessageParameter(String event, org.springframework.amqp.core.Message message) {}

    @IdempotentListener(key = "#p1.getHeader('Idempotency-Key')")
    public void propertiesParameter(String event, MessageProperties properties) {}

    @IdempotentListener(key = "#unknown")
    public void unknownVariable(String event) {}

    @IdempotentListener(key = "#p0.?[true].size()")
    public void messagesOfABatch(List<Message<String>> messages) {}

    @IdempotentListener(key = "#payload")
    public void springMessagePayloadVariable(Message<String> message) {}

    @IdempotentListener(key = "#payload.messageProperties.messageId")
    public void amqpMessagePayloadVariable(org.springframework.amqp.core.Message message) {}

    @IdempotentListener(key = "#payload")
    public void headerFirstPayloadVariable(@Header("Idempotency-Key") String key, String event) {}

    @Idempotent(key = "#p0")
    public void idempotentPayload(String event, @Header("Idempotency-Key") String key) {}

    @Idempotent(key = "#p1")
    public void idempotentHeader(String event, @Header("Idempotency-Key") String key) {}

    @Idempotent(key = "#p0.headers['Idempotency-Key']")
    public void idempotentMessage(Message<String> message) {}
  }

  @Test
  void aKeyReadFromThePayloadOnlyIsPayloadKeyed() {
    assertThat(keyedByPayload("payload")).isTrue();
    assertThat(keyedByPayload("payloadProperty")).isTrue();
    assertThat(keyedByPayload("payloadParameters")).isTrue();
    assertThat(keyedByPayload("typeReference")).isTrue();
    assertThat(keyedByPayload("idempotentPayload")).isTrue();
    assertThat(keyedByPayload("springMessagePayloadVariable")).isTrue();
  }

  @Test
  void aKeyThatMayReadTheHeadersIsNot() {
    for (String name :
        List.of(
            "headerParameter",
            "headerParameterByName",
            "headersParameter",
            "headersVariable",
            "defaultHeader",
            "messageParameter",
            "messageRoot",
            "messageRootVariable",
            "amqpMessageParameter",
            "propertiesParameter",
            "unknownVariable",
            "messagesOfABatch",
            "idempotentHeader",
            "idempotentMessage",
            "amqpMessagePayloadVariable",
            "headerFirstPayloadVariable",
            "headerOnTheInterface")) {
      assertThat(keyedByPayload(name)).as(name).isFalse();
    }
  }

  private static boolean keyedByPayload(String name) {
    Method method =
        Arrays.stream(Listeners.class.getMethods())
            .filter(m -> m.getName().equals(name) && m.getDeclaringClass() == Listeners.class)
            .findFirst()
            .orElseThrow();
    return RabbitProducerBatchParts.keyedByPayload(method);
  }
}
