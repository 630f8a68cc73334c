package dev.idempotency.spring.suite;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.api.Test;

/**
 * Probe (fixkafka2): a Kafka record listener whose store fails with a store client's own exception
 * that Spring Kafka's {@code DefaultErrorHandler} classifies as fatal by default (a {@code
 * ClassCastException}: a reply of an unexpected type), wrapped by the guard in a {@code
 * KeyStoreException}. The delivery is deferred (the store could not be asked), and a deferral comes
 * back until the store answers, never skipped. The promise (SPEC 1: no lost send; SPEC 15: never
 * dead-lettered for that reason): once the store answers again, the message is sent.
 *
 * <p>Found (medium, a lost send) by reading Spring Kafka 3.3's source, then by this test on Boot
 * 3.5 ("sends of the message (store refusals: 2) expected: 1 but was: 0"): the starter's own
 * handler for deferrals was a {@code DefaultErrorHandler} with its default classification, which
 * walks the cause chain; a fatal class anywhere under the deferral gave it no retry, and its
 * recoverer (which does nothing: "never called") skipped the record, committed unsent. Fixed: that
 * handler classifies nothing as fatal.
 */
class KafkaDeferralFatalCauseProbeTest {

  @Test
  void aDeferralWhoseStoreFailureHoldsAClassCastExceptionIsSentOnceTheStoreAnswers()
      throws Exception {
    SwitchableKeyStore store = new SwitchableKeyStore();
    SuiteProvider provider = new SuiteProvider();
    String topic = "idem.probe-deferral-fatal-cause-" + UUID.randomUUID();
    store.failsWith.set(new ClassCastException("a reply of an unexpected type (test)"));
    try (KafkaListenerApplication application =
        KafkaListenerApplication.record(store, provider, new CountDownLatch(1), topic)) {
      String key = "probe-fatal-cause-" + UUID.randomUUID();
      application.publish(key, key);
      Waits.await("the store refused", () -> store.refused.get() >= 1);
      store.failsWith.set(null);
      try {
        Waits.await("the message sent", () -> provider.sends(key) >= 1);
      } catch (AssertionError timedOut) {
        // the assertion says what happened
      }
      assertThat(provider.sends(key))
          .as("sends of the message (store refusals: " + store.refused.get() + ")")
          .isEqualTo(1);
    }
  }
}
