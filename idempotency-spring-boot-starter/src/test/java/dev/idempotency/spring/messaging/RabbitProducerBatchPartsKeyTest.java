package dev.idempotency.spring.messaging;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.Idempotent;
import java.lang.reflect.Method;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.core.MessageProperties;
import org.springframework.amqp.rabbit.listener.adapter.AmqpMessageHandlerMethodFactory;
import org.springframework.core.MethodParameter;
import org.springframework.messaging.Message;
import org.springframework.messaging.converter.GenericMessageConverter;
import org.springframework.messaging.handler.annotation.Header;
import org.springframework.messaging.handler.annotation.Headers;
import org.springframework.messaging.handler.annotation.Payload;
import org.springframework.messaging.handler.invocation.HandlerMethodArgumentResolver;
import org.springframework.messaging.handler.invocation.InvocableHandlerMethod;

/**
 * Which guarded RabbitMQ listeners read their key from the payload only ({@code
 * PayloadKeys#keyedByPayload}): the parts after the first of a producer's batch carry the first
 * message's headers, so any other listener has them rejected, never sent as the first's replay.
 * Payload-keyed listeners are left as they are.
 */
class RabbitProducerBatchPartsKeyTest {

  record Order(String orderId) {}

  /** A parameter the application's own argument resolver gives ({@link #KEY_REF_RESOLVER}). */
  record KeyRef(String value) {}

  /** The application's resolver: a {@link KeyRef} from the Idempotency-Key header. */
  static final HandlerMethodArgumentResolver KEY_REF_RESOLVER =
      new HandlerMethodArgumentResolver() {
        @Override
        public boolean supportsParameter(MethodParameter parameter) {
          return parameter.getParameterType() == KeyRef.class;
        }

        @Override
        public Object resolveArgument(MethodParameter parameter, Message<?> message) {
          return new KeyRef(String.valueOf(message.getHeaders().get("Idempotency-Key")));
        }
      };

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

    @IdempotentListener(key = "#p1.value")
    public void resolvedParameter(String event, KeyRef key) {}

    @IdempotentListener(key = "#p1.value")
    public void resolvedPayloadAnnotatedParameter(String event, @Payload KeyRef key) {}

    @Idempotent(key = "#p1.value")
    public void idempotentResolvedParameter(String event, KeyRef key) {}

    @IdempotentListener(key = "#p0.toString()")
    public void objectParameter(Object event) {}

    @IdempotentListener(key = "#p1 + #event")
    public void payloadBesideResolved(KeyRef ignored, String event) {}
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

  /**
   * As Spring AMQP invokes a listener method (its handler's argument resolvers): a parameter that
   * the application's own resolver supports, {@code @Payload} or not, is resolved by it, before
   * Spring's payload resolver, and may read the headers; an {@code Object} parameter gets the AMQP
   * message, which Spring AMQP provides by type.
   */
  @Test
  void aParameterResolvedByTheApplicationsResolverIsNotThePayload() {
    for (String name :
        List.of(
            "resolvedParameter",
            "resolvedPayloadAnnotatedParameter",
            "idempotentResolvedParameter",
            "objectParameter",
            "headerParameter",
            "headerOnTheInterface",
            "messageParameter",
            "amqpMessagePayloadVariable")) {
      assertThat(keyedByPayload(handler(name, KEY_REF_RESOLVER))).as(name).isFalse();
    }
  }

  @Test
  void aParameterSpringsPayloadResolverResolvesIsThePayload() {
    for (String name :
        List.of(
            "payload",
            "payloadProperty",
            "payloadParameters",
            "typeReference",
            "idempotentPayload",
            "springMessagePayloadVariable",
            "payloadBesideResolved")) {
      assertThat(keyedByPayload(handler(name, KEY_REF_RESOLVER))).as(name).isTrue();
    }
    // without the application's resolver, Spring's payload resolver takes the KeyRef parameter
    assertThat(keyedByPayload(handler("resolvedParameter"))).isTrue();
  }

  /** A handler whose resolvers cannot be known (none): no parameter counts as the payload. */
  @Test
  void aHandlerWithoutResolversReadsNoPayload() {
    InvocableHandlerMethod bare = new InvocableHandlerMethod(new Listeners(), method("payload"));
    assertThat(PayloadKeys.keyedByPayload(bare)).isFalse();
  }

  /**
   * The handler Spring AMQP's default factory for {@code @RabbitListener} methods makes ({@code
   * AmqpMessageHandlerMethodFactory}), with the application's resolvers.
   */
  private static InvocableHandlerMethod handler(
      String name, HandlerMethodArgumentResolver... custom) {
    AmqpMessageHandlerMethodFactory factory = new AmqpMessageHandlerMethodFactory();
    factory.setCustomArgumentResolvers(List.of(custom));
    factory.setMessageConverter(new GenericMessageConverter());
    factory.afterPropertiesSet();
    return factory.createInvocableHandlerMethod(new Listeners(), method(name));
  }

  private static boolean keyedByPayload(InvocableHandlerMethod handler) {
    return PayloadKeys.keyedByPayload(handler);
  }

  private static Method method(String name) {
    return Arrays.stream(Listeners.class.getMethods())
        .filter(m -> m.getName().equals(name) && m.getDeclaringClass() == Listeners.class)
        .findFirst()
        .orElseThrow();
  }

  private static boolean keyedByPayload(String name) {
    Method method =
        Arrays.stream(Listeners.class.getMethods())
            .filter(m -> m.getName().equals(name) && m.getDeclaringClass() == Listeners.class)
            .findFirst()
            .orElseThrow();
    return PayloadKeys.keyedByPayload(method);
  }
}
