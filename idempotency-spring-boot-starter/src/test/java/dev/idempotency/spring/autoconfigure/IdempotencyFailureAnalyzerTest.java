package dev.idempotency.spring.autoconfigure;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.idempotency.spring.IdempotencyConfigurationException;
import dev.idempotency.spring.Idempotent;
import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.web.IdempotentEndpoint;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.autoconfigure.ImportAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.diagnostics.FailureAnalysis;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;

/**
 * Issue 37 (a newcomer's findings): a start the starter refuses showed its message only at the
 * bottom of Spring's exception chain, under a {@code BeanCreationException} or two. Spring Boot now
 * reports it as "APPLICATION FAILED TO START" with the starter's problem under "Description" and
 * what to do under "Action" ({@link IdempotencyFailureAnalyzer}, registered in {@code
 * META-INF/spring.factories}): each case is a real {@code SpringApplication} run that fails, and
 * what Boot printed, one refusal of each kind: the records table, a window, default names, a store
 * property, a listener, an endpoint. On Boot 3.5 in spring-boot-3-tests, on Boot 4.0 in
 * spring-boot-4-tests.
 */
@ExtendWith(OutputCaptureExtension.class)
class IdempotencyFailureAnalyzerTest {

  private static final String NL = System.lineSeparator();

  /** A JDBC store whose table is missing, with schema initialisation off. */
  @Configuration(proxyBeanMethods = false)
  @ImportAutoConfiguration(IdempotencyAutoConfiguration.class)
  static class MissingTable {
    @Bean
    DataSource dataSource() {
      return IdempotencyAutoConfigurationTest.h2();
    }
  }

  @Test
  void aMissingRecordsTableIsReportedWithTheTableThePropertyAndTheDdl(CapturedOutput output) {
    IdempotencyConfigurationException refusal =
        failedStart(
            MissingTable.class,
            "idempotency.jdbc.initialize-schema=never",
            "idempotency.jdbc.table-name=idem_missing",
            // a database that does not answer within these starts the application (with a WARN):
            // generous on a busy machine, where H2's first connection took longer than the 2 s
            "idempotency.jdbc.connection-wait=60s",
            "idempotency.jdbc.operation-timeout=60s");

    assertThat(refusal.getProblem())
        .contains("The idempotency table idem_missing does not exist")
        .contains("idempotency.jdbc.initialize-schema=never does not create it");
    assertThat(refusal.getAction())
        .contains("Set idempotency.jdbc.initialize-schema=always")
        .contains("the DDL is dev/idempotency/jdbc/schema-h2.sql in the idempotency-jdbc jar");
    assertReported(output, refusal);
  }

  @Test
  void aPurgeIntervalThatIsNotPositiveIsReportedWithTheProperty(CapturedOutput output) {
    IdempotencyConfigurationException refusal =
        failedStart(
            MissingTable.class,
            "idempotency.jdbc.initialize-schema=always",
            "idempotency.jdbc.purge.interval=0s");

    assertThat(refusal.getProblem())
        .isEqualTo("idempotency.jdbc.purge.interval must be positive, was PT0S.");
    assertThat(refusal.getAction()).contains("idempotency.jdbc.purge.enabled=false");
    assertReported(output, refusal);
  }

  /** A guarded method whose window is not longer than the lease (30 s by default). */
  @Configuration(proxyBeanMethods = false)
  @ImportAutoConfiguration(IdempotencyAutoConfiguration.class)
  static class TtlNotLongerThanTheLease {
    @Bean
    Mailer mailer() {
      return new Mailer();
    }
  }

  static class Mailer {
    @Idempotent(key = "#orderId", ttl = "30s")
    public String send(String orderId) {
      return orderId;
    }
  }

  @Test
  void aWindowNotLongerThanTheLeaseIsReportedWithWhatToChange(CapturedOutput output) {
    IdempotencyConfigurationException refusal =
        failedStart(TtlNotLongerThanTheLease.class, "idempotency.store=memory");

    assertThat(refusal.getProblem())
        .contains("@Idempotent on " + Mailer.class.getName() + ".send(..)")
        .contains("ttl '30s' must be longer than the lease (idempotency.lease = PT30S)");
    assertThat(refusal.getAction()).contains("shorten idempotency.lease");
    assertReported(output, refusal);
  }

  /** Two classes named Sms in two "packages" (outer classes): one default name. */
  @Configuration(proxyBeanMethods = false)
  @ImportAutoConfiguration(IdempotencyAutoConfiguration.class)
  static class SameDefaultName {
    @Bean
    Billing.Sms billingSms() {
      return new Billing.Sms();
    }

    @Bean
    Shipping.Sms shippingSms() {
      return new Shipping.Sms();
    }
  }

  static class Billing {
    static class Sms {
      @Idempotent(key = "#invoiceId")
      public String send(String invoiceId) {
        return invoiceId;
      }
    }
  }

  static class Shipping {
    static class Sms {
      @Idempotent(key = "#orderId")
      public String send(String orderId) {
        return orderId;
      }
    }
  }

  @Test
  void twoMethodsOfOneDefaultNameAreReportedNamingBoth(CapturedOutput output) {
    IdempotencyConfigurationException refusal =
        failedStart(SameDefaultName.class, "idempotency.store=memory");

    assertThat(refusal.getProblem())
        .contains("have the same default name 'Sms.send'")
        .contains(Billing.Sms.class.getName() + ".send(String)")
        .contains(Shipping.Sms.class.getName() + ".send(String)");
    assertThat(refusal.getAction()).isEqualTo("Give each its own @Idempotent(name = \"...\").");
    assertReported(output, refusal);
  }

  /** Redis chosen by property, and no Redis client in the application. */
  @Configuration(proxyBeanMethods = false)
  @ImportAutoConfiguration(IdempotencyAutoConfiguration.class)
  static class NoStoreForTheProperty {}

  @Test
  void aStorePropertyTheApplicationHasNoClientForIsReportedWithTheProperty(CapturedOutput output) {
    IdempotencyConfigurationException refusal =
        failedStart(NoStoreForTheProperty.class, "idempotency.store=redis");

    assertThat(refusal.getProblem())
        .startsWith("idempotency.store=redis but the application has no Lettuce connection");
    assertThat(refusal.getAction()).contains("set idempotency.store to a store the application");
    assertReported(output, refusal);
  }

  /** A listener that names no key, with the header property emptied. */
  @Configuration(proxyBeanMethods = false)
  @ImportAutoConfiguration({
    IdempotencyAutoConfiguration.class,
    IdempotencyMessagingAutoConfiguration.class
  })
  static class ListenerWithoutAKey {
    @Bean
    Deliveries deliveries() {
      return new Deliveries();
    }
  }

  static class Deliveries {
    @IdempotentListener
    public void onEvent(String event) {}
  }

  @Test
  void aListenerThatNamesNoKeyIsReportedWithWhereTheKeyComesFrom(CapturedOutput output) {
    IdempotencyConfigurationException refusal =
        failedStart(
            ListenerWithoutAKey.class, "idempotency.store=memory", "idempotency.messaging.header=");

    assertThat(refusal.getProblem())
        .startsWith("@IdempotentListener on " + Deliveries.class.getName() + ".onEvent(..)")
        .contains("names no key")
        .contains("message id or offset is never used");
    assertThat(refusal.getAction())
        .startsWith("Set key (SpEL over the payload")
        .contains("idempotency.messaging.header");
    assertReported(output, refusal);
  }

  /** A Spring MVC endpoint whose handler method is final: Spring AOP cannot see it start. */
  @SpringBootConfiguration
  @EnableAutoConfiguration
  static class FinalEndpoint {
    @Bean
    FinalHandler finalHandler() {
      return new FinalHandler();
    }
  }

  @RestController
  static class FinalHandler {
    @PostMapping("/analyzed/final")
    @IdempotentEndpoint
    public final String send() {
      return "sent";
    }
  }

  @Test
  void aFinalEndpointMethodIsReportedWithTheMethodAndTheFix(CapturedOutput output) {
    IdempotencyConfigurationException refusal =
        failedStart(
            FinalEndpoint.class,
            WebApplicationType.SERVLET,
            "idempotency.store=memory",
            "server.port=0");

    assertThat(refusal.getProblem())
        .startsWith("@IdempotentEndpoint on " + FinalHandler.class.getName() + ".send(")
        .contains("the method is final");
    assertThat(refusal.getAction()).isEqualTo("Make it public and not final.");
    assertReported(output, refusal);
  }

  /**
   * Runs the application, which must fail; checks that the analyzer finds the starter's refusal
   * under what Spring wrapped it in, and returns the refusal.
   */
  private static IdempotencyConfigurationException failedStart(
      Class<?> application, String... properties) {
    return failedStart(application, WebApplicationType.NONE, properties);
  }

  private static IdempotencyConfigurationException failedStart(
      Class<?> application, WebApplicationType type, String... properties) {
    Throwable failure =
        catchThrowable(
            () ->
                new SpringApplicationBuilder(application)
                    .web(type)
                    .properties("spring.main.banner-mode=off")
                    .properties(properties)
                    .run()
                    .close());
    assertThat(failure).as("the start's failure").isNotNull();
    assertThat(rootCause(failure))
        .as(
            "the refusal, as Spring threw it (most wrapped in a BeanCreationException or two, so"
                + " that its message alone would be at the bottom; the endpoint checks unwrapped)")
        .isInstanceOf(IdempotencyConfigurationException.class);
    IdempotencyConfigurationException refusal =
        (IdempotencyConfigurationException) rootCause(failure);
    FailureAnalysis analysis = new IdempotencyFailureAnalyzer().analyze(failure);
    assertThat(analysis).isNotNull();
    assertThat(analysis.getDescription()).isEqualTo(refusal.getProblem());
    assertThat(analysis.getAction()).isEqualTo(refusal.getAction());
    assertThat(analysis.getCause()).isSameAs(refusal);
    assertThat(refusal.getMessage()).isEqualTo(refusal.getProblem() + " " + refusal.getAction());
    return refusal;
  }

  /** What Spring Boot printed: its failure report, with the problem and the action apart. */
  private static void assertReported(
      CapturedOutput output, IdempotencyConfigurationException refusal) {
    assertThat(output.toString())
        .contains("APPLICATION FAILED TO START")
        .contains("Description:" + NL + NL + refusal.getProblem() + NL)
        .contains("Action:" + NL + NL + refusal.getAction() + NL);
  }

  private static Throwable rootCause(Throwable failure) {
    Throwable root = failure;
    while (root.getCause() != null && root.getCause() != root) {
      root = root.getCause();
    }
    return root;
  }
}
