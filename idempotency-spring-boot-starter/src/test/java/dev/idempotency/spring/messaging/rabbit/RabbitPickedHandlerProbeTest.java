package dev.idempotency.spring.messaging.rabbit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.spring.Idempotent;
import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import dev.idempotency.testservers.RabbitMqServer;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.aopalliance.intercept.MethodInterceptor;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.core.Declarables;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.core.MessageProperties;
import org.springframework.amqp.core.QueueBuilder;
import org.springframework.amqp.rabbit.annotation.RabbitHandler;
import org.springframework.amqp.rabbit.annotation.RabbitListener;
import org.springframework.amqp.rabbit.config.SimpleRabbitListenerContainerFactory;
import org.springframework.amqp.rabbit.connection.ConnectionFactory;
import org.springframework.aop.support.DefaultPointcutAdvisor;
import org.springframework.aop.support.StaticMethodMatcherPointcut;
import org.springframework.beans.factory.config.BeanDefinition;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.context.annotation.Role;
import org.springframework.core.NestedExceptionUtils;
import org.springframework.core.Ordered;
import org.springframework.messaging.handler.annotation.Header;
import org.springframework.test.annotation.DirtiesContext;

/**
 * probeP, on a real RabbitMQ broker: attempts to break SPEC 1 on the per-handler decision of a
 * producer batch's later parts (76e4095, {@code PickedHandlers}): the check bound for a delivery is
 * run by the first guarded method called on the consumer thread, which the starter takes to be the
 * {@code @RabbitHandler} Spring picked. A later part (it carries the first message's headers) must
 * never be acknowledged unsent as the first's replay, and a check must never outlive its delivery.
 */
@SpringBootTest(
    classes = RabbitPickedHandlerProbeTest.App.class,
    properties = "logging.level.org.springframework.amqp.rabbit.listener=OFF")
@DirtiesContext
class RabbitPickedHandlerProbeTest extends RabbitProbeSupport {

  static final String CALLER_QUEUE = "idem.picked-probe.caller";
  static final String PLAIN_CALLER_QUEUE = "idem.picked-probe.plain-caller";
  static final String AUDITED_QUEUE = "idem.picked-probe.audited";
  static final String LEAK_QUEUE = "idem.picked-probe.leak";
  static final String HIDDEN_QUEUE = "idem.picked-probe.hidden";
  static final String MIXED_HIDDEN_QUEUE = "idem.picked-probe.mixed-hidden";
  static final String SWALLOWED_QUEUE = "idem.picked-probe.swallowed";

  static final List<String> sent = new CopyOnWriteArrayList<>();
  static final List<String> audited = new CopyOnWriteArrayList<>();

  /** Another bean's guarded service method, keyed by the key it is given. */
  public static class Sender {
    @Idempotent(name = "picked-probe-send", key = "#p0")
    public void send(String key, String event) {
      sent.add(event);
    }
  }

  /** A guarded audit of each delivery, keyed by the message's body (each part's own). */
  public static class Audit {
    @Idempotent(name = "picked-probe-audit", key = "#p0")
    public void received(String body) {
      audited.add(body);
    }
  }

  /**
   * A class-level listener: its text handler is not guarded and hands its {@code @Header} key to a
   * guarded service; its bytes handler is guarded and header-keyed (so its container is guarded).
   */
  @RabbitListener(id = "picked-probe-caller", queues = CALLER_QUEUE)
  public static class CallerHandlers {
    private final Sender sender;

    public CallerHandlers(Sender sender) {
      this.sender = sender;
    }

    @RabbitHandler
    public void text(String event, @Header("Idempotency-Key") String key) {
      sender.send(key, event);
    }

    @RabbitHandler
    @IdempotentListener(name = "picked-probe-caller-bytes", key = "#p1")
    public void bytes(byte[] event, @Header("Idempotency-Key") String key) {
      sent.add(new String(event, StandardCharsets.UTF_8));
    }
  }

  /** A method-level listener, not guarded, that hands its {@code @Header} key to the service. */
  public static class PlainCaller {
    private final Sender sender;

    public PlainCaller(Sender sender) {
      this.sender = sender;
    }

    @RabbitListener(id = "picked-probe-plain-caller", queues = PLAIN_CALLER_QUEUE)
    public void onEvent(String event, @Header("Idempotency-Key") String key) {
      sender.send(key, event);
    }
  }

  /**
   * A class-level listener whose bytes handler is guarded and header-keyed, in a container whose
   * advice chain has the application's audit advice (it calls a guarded method for each delivery).
   */
  @RabbitListener(
      id = "picked-probe-audited",
      queues = AUDITED_QUEUE,
      containerFactory = "pickedProbeAuditedFactory")
  public static class AuditedHandlers {
    @RabbitHandler
    public void text(String event) {
      sent.add(event);
    }

    @RabbitHandler
    @IdempotentListener(name = "picked-probe-audited-bytes", key = "#p1")
    public void bytes(byte[] event, @Header("Idempotency-Key") String key) {
      sent.add(new String(event, StandardCharsets.UTF_8));
    }
  }

  /**
   * A class-level listener: text to an unguarded handler that calls nothing guarded (a check bound
   * for a later part is left unrun), bytes to a guarded header-keyed handler.
   */
  @RabbitListener(id = "picked-probe-leak", queues = LEAK_QUEUE)
  public static class LeakHandlers {
    @RabbitHandler
    public void text(String event) {
      sent.add(event);
    }

    @RabbitHandler
    @IdempotentListener(name = "picked-probe-leak-bytes", key = "#p1")
    public void bytes(byte[] event, @Header("Idempotency-Key") String key) {
      sent.add(new String(event, StandardCharsets.UTF_8));
    }
  }

  /**
   * A class-level listener whose guarded header-keyed bytes handler is package-private (Spring AMQP
   * finds and invokes {@code @RabbitHandler} methods whatever their visibility, and the class-based
   * proxy runs the guard on them).
   */
  @RabbitListener(id = "picked-probe-hidden", queues = HIDDEN_QUEUE)
  public static class HiddenHandlers {
    @RabbitHandler
    public void text(String event) {
      sent.add(event);
    }

    @RabbitHandler
    @IdempotentListener(name = "picked-probe-hidden-bytes", key = "#p1")
    void bytes(byte[] event, @Header("Idempotency-Key") String key) {
      sent.add(new String(event, StandardCharsets.UTF_8));
    }
  }

  /**
   * A class-level listener with two guarded header-keyed handlers: a public one for text (so its
   * container counts as guarded and its parts are marked) and a package-private one for bytes.
   */
  @RabbitListener(id = "picked-probe-mixed-hidden", queues = MIXED_HIDDEN_QUEUE)
  public static class MixedHiddenHandlers {
    @RabbitHandler
    @IdempotentListener(name = "picked-probe-mixed-hidden-text", key = "#p1")
    public void text(String event, @Header("Idempotency-Key") String key) {
      sent.add(event);
    }

    @RabbitHandler
    @IdempotentListener(name = "picked-probe-mixed-hidden-bytes", key = "#p1")
    void bytes(byte[] event, @Header("Idempotency-Key") String key) {
      sent.add(new String(event, StandardCharsets.UTF_8));
    }
  }

  /**
   * A class-level listener whose guarded header-keyed bytes handler is wrapped by the application's
   * own advice, outside the guard, that logs and drops what the handler throws.
   */
  @RabbitListener(id = "picked-probe-swallowed", queues = SWALLOWED_QUEUE)
  public static class SwallowedHandlers {
    @RabbitHandler
    public void text(String event) {
      sent.add(event);
    }

    @RabbitHandler
    @IdempotentListener(name = "picked-probe-swallowed-bytes", key = "#p1")
    public void bytes(byte[] event, @Header("Idempotency-Key") String key) {
      sent.add(new String(event, StandardCharsets.UTF_8));
    }
  }

  static final List<String> swallowed = new CopyOnWriteArrayList<>();

  static final String MANUAL_QUEUE = "idem.picked-probe.manual";

  /** A class-level listener, MANUAL acknowledgement, whose guarded handler is package-private. */
  @RabbitListener(id = "picked-probe-manual", queues = MANUAL_QUEUE, ackMode = "MANUAL")
  public static class ManualHiddenHandlers {
    @RabbitHandler
    public void text(String event) {}

    @RabbitHandler
    @IdempotentListener(name = "picked-probe-manual-bytes", key = "#p1")
    void bytes(byte[] event, @Header("Idempotency-Key") String key) {}
  }

  /** An application with {@link ManualHiddenHandlers} alone. */
  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  static class ManualApp {
    @Bean
    ManualHiddenHandlers pickedProbeManualHiddenHandlers() {
      return new ManualHiddenHandlers();
    }

    @Bean
    Declarables pickedProbeManualQueue() {
      return new Declarables(QueueBuilder.nonDurable(MANUAL_QUEUE).build());
    }
  }

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ListenerTestConfiguration.class)
  static class App {
    @Bean
    Sender pickedProbeSender() {
      return new Sender();
    }

    @Bean
    Audit pickedProbeAudit() {
      return new Audit();
    }

    @Bean
    CallerHandlers pickedProbeCallerHandlers(Sender pickedProbeSender) {
      return new CallerHandlers(pickedProbeSender);
    }

    @Bean
    PlainCaller pickedProbePlainCaller(Sender pickedProbeSender) {
      return new PlainCaller(pickedProbeSender);
    }

    @Bean
    AuditedHandlers pickedProbeAuditedHandlers() {
      return new AuditedHandlers();
    }

    @Bean
    LeakHandlers pickedProbeLeakHandlers() {
      return new LeakHandlers();
    }

    @Bean
    MixedHiddenHandlers pickedProbeMixedHiddenHandlers() {
      return new MixedHiddenHandlers();
    }

    @Bean
    SwallowedHandlers pickedProbeSwallowedHandlers() {
      return new SwallowedHandlers();
    }

    /** The application's "log and drop" advice on SwallowedHandlers.bytes, outside the guard. */
    @Bean
    @Role(BeanDefinition.ROLE_INFRASTRUCTURE)
    static DefaultPointcutAdvisor pickedProbeSwallowingAdvisor() {
      DefaultPointcutAdvisor advisor =
          new DefaultPointcutAdvisor(
              new StaticMethodMatcherPointcut() {
                @Override
                public boolean matches(Method method, Class<?> targetClass) {
                  return targetClass == SwallowedHandlers.class && method.getName().equals("bytes");
                }
              },
              (MethodInterceptor)
                  invocation -> {
                    try {
                      return invocation.proceed();
                    } catch (RuntimeException dropped) {
                      swallowed.add(dropped.getClass().getSimpleName());
                      return null;
                    }
                  });
      advisor.setOrder(Ordered.HIGHEST_PRECEDENCE);
      return advisor;
    }

    @Bean
    HiddenHandlers pickedProbeHiddenHandlers() {
      return new HiddenHandlers();
    }

    @Bean
    Declarables pickedProbeQueues() {
      return deadLetteredQueues(
          CALLER_QUEUE,
          PLAIN_CALLER_QUEUE,
          AUDITED_QUEUE,
          LEAK_QUEUE,
          HIDDEN_QUEUE,
          MIXED_HIDDEN_QUEUE,
          SWALLOWED_QUEUE);
    }

    /** A factory whose containers' advice chain audits each delivery (a guarded call). */
    @Bean
    SimpleRabbitListenerContainerFactory pickedProbeAuditedFactory(
        ConnectionFactory connectionFactory, Audit pickedProbeAudit) {
      SimpleRabbitListenerContainerFactory factory = new SimpleRabbitListenerContainerFactory();
      factory.setConnectionFactory(connectionFactory);
      factory.setReceiveTimeout(100L);
      factory.setAdviceChain(
          (MethodInterceptor)
              invocation -> {
                Object[] arguments = invocation.getArguments();
                if (arguments.length > 1 && arguments[1] instanceof Message message) {
                  pickedProbeAudit.received(new String(message.getBody(), StandardCharsets.UTF_8));
                }
                return invocation.proceed();
              });
      return factory;
    }
  }

  @Override
  List<String> sends() {
    return sent;
  }

  /**
   * A class-level listener's unguarded text handler hands its {@code @Header} key to another bean's
   * {@code @Idempotent} method; it gets a producer's batch of two text messages, each with its own
   * key. The second part carries the first's header: it must be sent once or dead-lettered, never
   * acknowledged as the first's replay.
   */
  // Open finding (severity low, a lost send; an unguarded listener's parts are Spring AMQP's, and
  // docs/message-consumers.md tells the user to key such a service by the payload where producers
  // batch, or to guard the listener), Boot 3.5 and 4.0 at 657d791, and Boot 3.5 at 774a0d8: "[the
  // second (its own key) sent once or dead-lettered; sends: 0, dead-lettered: []]". The unguarded
  // handler takes every part, and the second part's @Header key is the first's, so the service
  // replays it: acknowledged unsent. Not fixable soundly from the starter: the service's key is an
  // argument, and nothing tells whether the listener read it from the part's headers (the first
  // message's) or from its payload (its own); refusing a key that an earlier part of the batch used
  // would dead-letter batches whose payload keys repeat by design.
  @Test
  @Tag("open-finding")
  void anUnguardedHandlerHandingItsHeaderKeyToAGuardedServiceNeverLosesALaterPart()
      throws Exception {
    String first = unique("uc-first");
    String second = unique("uc-second");
    publishBatch(CALLER_QUEUE, messages(List.of(first, second)));
    awaitTextMarker(CALLER_QUEUE, "uc");
    firstSentOnceAndSecondSentOnceOrDeadLettered(CALLER_QUEUE, first, second);
  }

  /**
   * The same with a method-level listener that is not guarded: its container is not guarded, so its
   * parts are Spring AMQP's, untouched (as docs/message-consumers.md says).
   */
  // Open finding (severity low, as above; shows the gap is not the class-level rule's), Boot 3.5
  // and 4.0 at 657d791, and Boot 3.5 at 774a0d8 (same message). Not fixable from the starter, as
  // above; its container is not even guarded (nothing marks its parts).
  @Test
  @Tag("open-finding")
  void anUnguardedListenerHandingItsHeaderKeyToAGuardedServiceNeverLosesALaterPart()
      throws Exception {
    String first = unique("pc-first");
    String second = unique("pc-second");
    publishBatch(PLAIN_CALLER_QUEUE, messages(List.of(first, second)));
    awaitTextMarker(PLAIN_CALLER_QUEUE, "pc");
    firstSentOnceAndSecondSentOnceOrDeadLettered(PLAIN_CALLER_QUEUE, first, second);
  }

  /**
   * A class-level listener's guarded header-keyed bytes handler, in a container whose advice (the
   * application's, between the starter's two parts) calls a guarded audit method for each delivery
   * first: a producer's batch of two byte messages, each with its own key. The check bound for the
   * second part must be run by the handler Spring picked, not used up by the audit call: the second
   * must be sent once or dead-lettered, never acknowledged as the first's replay.
   */
  // Was an open finding, fixed by fixpicked (the check runs only for one of the listener's guarded
  // handlers, PickedHandlers.Check). It read:
  // open finding (severity medium, a lost send, SPEC 1), Boot 3.5 and 4.0 at 657d791: "[the second
  // (its own
  // key) sent once or dead-lettered; sends: 0, dead-lettered: []] Expecting value to be true but
  // was
  // false". PickedHandlers runs its check on the first guarded method called during the delivery
  // and unbinds it: the audit's @Idempotent call takes it (not a refusing handler: passes), and the
  // header-keyed bytes handler then runs unchecked with the first message's key, a replay.
  @Test
  void aGuardedCallBeforeThePickedHandlerNeverLetsALaterPartPassAsTheFirstsReplay()
      throws Exception {
    String first = unique("au-first");
    String second = unique("au-second");
    publishBatch(AUDITED_QUEUE, List.of(bytes(first), bytes(second)));
    awaitBytesMarker(AUDITED_QUEUE, "au");
    assertThat(audited).as("the audit advice ran for the parts (the premise)").contains(first);
    firstSentOnceAndSecondSentOnceOrDeadLettered(AUDITED_QUEUE, first, second);
  }

  /**
   * A check bound for a later part that the unguarded text handler took (and never ran) must not
   * outlive that delivery: the next message on the same consumer, a plain bytes message with its
   * own key to the guarded handler, is sent once, nothing dead-lettered. Then a producer's batch to
   * the guarded handler still has its second part refused.
   */
  @Test
  void aCheckLeftUnrunByAnUnguardedHandlerDoesNotReachTheNextDelivery() throws Exception {
    String first = unique("lk-first");
    String second = unique("lk-second");
    publishBatch(LEAK_QUEUE, messages(List.of(first, second)));
    await("the unguarded handler took both parts", () -> sent(second) >= 1);
    String next = unique("lk-next");
    plain.send("", LEAK_QUEUE, bytes(next));
    awaitTextMarker(LEAK_QUEUE, "lk");
    List<String> deadLettered = drainDeadLetters(LEAK_QUEUE);

    assertThat(List.of(sent(first), sent(second), sent(next)))
        .as("sends of the two parts and the next message; dead-lettered: %s", deadLettered)
        .containsExactly(1, 1, 1);

    String third = unique("lk-third");
    String fourth = unique("lk-fourth");
    publishBatch(LEAK_QUEUE, List.of(bytes(third), bytes(fourth)));
    awaitBytesMarker(LEAK_QUEUE, "lk2");
    firstSentOnceAndSecondSentOnceOrDeadLettered(LEAK_QUEUE, third, fourth);
  }

  /**
   * A class-level listener's package-private guarded header-keyed bytes handler: a message sent
   * twice with one key is sent once (the premise: the guard runs on it), and a producer's batch of
   * two byte messages, each with its own key, has its second part sent once or dead-lettered, never
   * acknowledged as the first's replay.
   */
  // Was an open finding, fixed by fixpicked (guarded handlers found among all user-declared
  // methods). It read:
  // open finding (severity high: a lost send for a guarded handler that is merely package-private,
  // SPEC 1), Boot 3.5 and 4.0 at 657d791: "[the second (its own key) sent once or dead-lettered;
  // sends: 0, dead-lettered: []] Expecting value to be true but was false" (the premise holds: the
  // guard runs, a message sent twice is sent once). UnsupportedRabbitContainers.guarded looks for a
  // class-level listener's guarded handlers among type.getMethods(), public ones only: the
  // container
  // counts as unguarded, its batching strategy is not wrapped, the parts are not marked, and the
  // second part's @Header (the first's) key is read as the first's replay.
  @Test
  void aPackagePrivateHeaderKeyedHandlerNeverTakesALaterPartAsTheFirstsReplay() throws Exception {
    String twice = unique("hd-twice");
    plain.send("", HIDDEN_QUEUE, bytes(twice));
    plain.send("", HIDDEN_QUEUE, bytes(twice));
    awaitBytesMarker(HIDDEN_QUEUE, "hd0");
    assertThat(sent(twice)).as("a message sent twice with one key (the guard runs)").isEqualTo(1);

    String first = unique("hd-first");
    String second = unique("hd-second");
    publishBatch(HIDDEN_QUEUE, List.of(bytes(first), bytes(second)));
    awaitBytesMarker(HIDDEN_QUEUE, "hd");
    firstSentOnceAndSecondSentOnceOrDeadLettered(HIDDEN_QUEUE, first, second);
  }

  /**
   * A class-level listener whose public text handler and package-private bytes handler are both
   * guarded and header-keyed (its container is guarded, its parts marked): a producer's batch of
   * two byte messages, each with its own key, has its second part sent once or dead-lettered, never
   * acknowledged as the first's replay.
   */
  // Was an open finding, fixed by fixpicked (guarded handlers found among all user-declared
  // methods). It read:
  // open finding (severity high, a lost send, SPEC 1), Boot 3.5 and 4.0 at 657d791: "[the second
  // (its own key) sent once or dead-lettered; sends: 0, dead-lettered: []]". The parts are marked
  // here, but the refusing handlers are found among type.getMethods() (public only): the check the
  // package-private handler's guard runs does not refuse it, and its @Header key is the first's.
  @Test
  void aPackagePrivateHandlerBesideAPublicGuardedOneNeverTakesALaterPartAsTheFirstsReplay()
      throws Exception {
    String first = unique("mh-first");
    String second = unique("mh-second");
    publishBatch(MIXED_HIDDEN_QUEUE, List.of(bytes(first), bytes(second)));
    awaitMarker(MIXED_HIDDEN_QUEUE, "mh");
    firstSentOnceAndSecondSentOnceOrDeadLettered(MIXED_HIDDEN_QUEUE, first, second);
  }

  /**
   * A class-level listener's guarded header-keyed bytes handler under the application's advice that
   * drops what the handler throws (outside the guard): a producer's batch of two byte messages,
   * each with its own key, has its second part sent once or dead-lettered, never acknowledged as
   * the first's replay.
   */
  // Was an open finding (severity low: needs an application advice on the listener bean that drops
  // failures, which would drop a deferral of any listener too), Boot 3.5 and 4.0 at 657d791, and
  // Boot 3.5 at 774a0d8: "[the second sent once or dead-lettered; sends: 0, dead-lettered: [],
  // dropped by the application's advice: [RejectedPart]]". A class-level listener's part is refused
  // inside the bean's proxy, where the application's own advisors ordered before the guard's sit
  // outside it. Fixed (fixrabbit): the starter's container advice keeps the refusal the picked
  // handler's check threw for its delivery and rejects the part even when the call returned.
  @Test
  void aRefusalDroppedByTheApplicationsAdviceOnTheHandlerNeverLosesALaterPart() throws Exception {
    String first = unique("sw-first");
    String second = unique("sw-second");
    publishBatch(SWALLOWED_QUEUE, List.of(bytes(first), bytes(second)));
    awaitBytesMarker(SWALLOWED_QUEUE, "sw");
    List<String> deadLettered = drainDeadLetters(SWALLOWED_QUEUE);

    assertThat(sent(first)).as("sends of the first").isEqualTo(1);
    assertThat(sent(second) == 1 || deadLettered.stream().anyMatch(d -> d.contains(second)))
        .as(
            "the second sent once or dead-lettered; sends: %d, dead-lettered: %s, dropped by the"
                + " application's advice: %s",
            sent(second), deadLettered, swallowed)
        .isTrue();
  }

  /**
   * MANUAL acknowledgement under a class-level listener whose guarded handler is package-private
   * must fail the start, as it does for a public guarded handler (a replay does not run the
   * listener, nothing acknowledges it, and the consumer stalls once its prefetch filled).
   */
  // Was an open finding, fixed by fixpicked (guarded handlers found among all user-declared
  // methods). It read:
  // open finding (severity medium: a consumer stuck, not a lost send), Boot 3.5 and 4.0 at 657d791:
  // "Expecting code to raise a throwable." Same cause as the package-private rows above:
  // UnsupportedRabbitContainers.guarded looks among public methods only, so none of its refusals
  // (MANUAL acknowledgement, a transacted channel, returnExceptions, the advice chain) applies.
  @Test
  void manualAcknowledgementUnderAPackagePrivateGuardedHandlerFailsTheStart() {
    assertThatThrownBy(
            () ->
                new SpringApplicationBuilder(ManualApp.class)
                    .web(WebApplicationType.NONE)
                    .properties(
                        "spring.rabbitmq.host=127.0.0.1",
                        "spring.rabbitmq.port=" + RabbitMqServer.shared().port(),
                        "idempotency.store=memory",
                        "spring.main.banner-mode=off")
                    .run()
                    .close())
        .satisfies(
            failure ->
                assertThat(NestedExceptionUtils.getMostSpecificCause(failure))
                    .hasMessageContaining("MANUAL acknowledgement, which is not supported"));
  }

  /**
   * A text marker with its own key, sent on its own, awaited: the queue's earlier ones are over.
   */
  private void awaitTextMarker(String queue, String prefix) throws InterruptedException {
    awaitMarker(queue, prefix);
  }

  /** A bytes marker with its own key, for a listener whose text handler is not the guarded one. */
  private void awaitBytesMarker(String queue, String prefix) throws InterruptedException {
    String marker = unique(prefix + "-marker");
    plain.send("", queue, bytes(marker));
    await("the marker sent", () -> sent(marker) >= 1);
  }

  private void firstSentOnceAndSecondSentOnceOrDeadLettered(
      String queue, String first, String second) {
    List<String> deadLettered = drainDeadLetters(queue);

    assertThat(sent(first)).as("sends of the first").isEqualTo(1);
    assertThat(sent(second) == 1 || deadLettered.stream().anyMatch(d -> d.contains(second)))
        .as(
            "the second (its own key) sent once or dead-lettered; sends: %d, dead-lettered: %s",
            sent(second), deadLettered)
        .isTrue();
  }

  /** The bodies in the dead-letter queue of {@code queue} (each waited for up to a second). */
  private List<String> drainDeadLetters(String queue) {
    List<String> bodies = new ArrayList<>();
    for (Message dead = plain.receive(queue + DEAD_LETTERS, 1_000);
        dead != null;
        dead = plain.receive(queue + DEAD_LETTERS, 1_000)) {
      bodies.add(new String(dead.getBody(), StandardCharsets.ISO_8859_1));
    }
    return bodies;
  }

  /** Bytes (application/octet-stream) keyed by their own Idempotency-Key header. */
  private static Message bytes(String payload) {
    Message message = message(payload);
    message.getMessageProperties().setContentType(MessageProperties.CONTENT_TYPE_BYTES);
    return message;
  }
}
