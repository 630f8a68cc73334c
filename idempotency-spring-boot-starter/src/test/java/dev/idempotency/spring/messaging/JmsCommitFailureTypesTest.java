package dev.idempotency.spring.messaging;

import static org.assertj.core.api.Assertions.assertThat;

import jakarta.jms.JMSException;
import org.apache.activemq.artemis.api.core.ActiveMQConnectionTimedOutException;
import org.apache.activemq.artemis.api.core.ActiveMQInterruptedException;
import org.apache.activemq.artemis.api.core.ActiveMQNotConnectedException;
import org.apache.activemq.artemis.api.core.ActiveMQObjectClosedException;
import org.apache.activemq.artemis.api.core.ActiveMQTransactionOutcomeUnknownException;
import org.apache.activemq.artemis.api.core.ActiveMQTransactionRolledBackException;
import org.apache.activemq.artemis.api.core.ActiveMQUnBlockedException;
import org.apache.activemq.artemis.jms.client.JMSExceptionHelper;
import org.junit.jupiter.api.Test;

/**
 * How {@link JmsSessionCommit} tells the failures of Artemis's JMS commit apart, on the exceptions
 * Artemis's own client builds: {@code ActiveMQSession.commit} converts the core client's {@code
 * ActiveMQException} with {@link JMSExceptionHelper} (a {@code TransactionRolledBackException} for
 * a rollback, a plain {@code JMSException} caused by the core exception otherwise), and an
 * interrupted blocking call throws the runtime {@code ActiveMQInterruptedException} as it is.
 */
class JmsCommitFailureTypesTest {

  @Test
  void aRollbackVerdictIsARollbackAndNothingElse() {
    JMSException failure =
        JMSExceptionHelper.convertFromActiveMQException(
            new ActiveMQTransactionRolledBackException("AMQ219030 (test)"));

    assertThat(failure).isInstanceOf(jakarta.jms.TransactionRolledBackException.class);
    assertThat(JmsSessionCommit.rolledBack(failure)).isTrue();
    assertThat(JmsSessionCommit.outcomeUnknown(failure)).isFalse();
    assertThat(JmsSessionCommit.causedByInterrupt(failure)).isFalse();
  }

  @Test
  void aCommitWhoseAnswerNeverCameHasAnUnknownFate() {
    for (Exception core :
        new Exception[] {
          new ActiveMQTransactionOutcomeUnknownException("AMQ219031 (test)"),
          new ActiveMQUnBlockedException("AMQ219016 (test)"),
          new ActiveMQConnectionTimedOutException("AMQ219014 (test)")
        }) {
      JMSException failure =
          JMSExceptionHelper.convertFromActiveMQException(
              (org.apache.activemq.artemis.api.core.ActiveMQException) core);

      assertThat(JmsSessionCommit.outcomeUnknown(failure)).as(core.getClass().getName()).isTrue();
      assertThat(JmsSessionCommit.rolledBack(failure)).as(core.getClass().getName()).isFalse();
      assertThat(JmsSessionCommit.causedByInterrupt(failure))
          .as(core.getClass().getName())
          .isFalse();
    }
  }

  @Test
  void anInterruptedCommitIsInterruptedOnly() {
    RuntimeException failure = new ActiveMQInterruptedException(new InterruptedException());

    assertThat(JmsSessionCommit.causedByInterrupt(failure)).isTrue();
    assertThat(JmsSessionCommit.rolledBack(failure)).isFalse();
    assertThat(JmsSessionCommit.outcomeUnknown(failure)).isFalse();
  }

  @Test
  void aClosedSessionOrDestroyedConnectionIsGoneAndNothingElse() {
    for (Exception core :
        new Exception[] {
          new ActiveMQObjectClosedException("AMQ219019 Session is closed (test)"),
          new ActiveMQNotConnectedException("AMQ219010 Connection is destroyed (test)")
        }) {
      JMSException failure =
          JMSExceptionHelper.convertFromActiveMQException(
              (org.apache.activemq.artemis.api.core.ActiveMQException) core);

      assertThat(JmsSessionCommit.sessionGone(failure)).as(core.getClass().getName()).isTrue();
      assertThat(JmsSessionCommit.rolledBack(failure)).as(core.getClass().getName()).isFalse();
      assertThat(JmsSessionCommit.outcomeUnknown(failure)).as(core.getClass().getName()).isFalse();
      assertThat(JmsSessionCommit.causedByInterrupt(failure))
          .as(core.getClass().getName())
          .isFalse();
    }
  }

  @Test
  void aRefusalOrARollbackIsNotAGoneSession() {
    assertThat(
            JmsSessionCommit.sessionGone(
                JMSExceptionHelper.convertFromActiveMQException(
                    new ActiveMQTransactionRolledBackException("AMQ219030 (test)"))))
        .isFalse();
    assertThat(JmsSessionCommit.sessionGone(new JMSException("AMQ229xxx refused (test)")))
        .isFalse();
  }
}
