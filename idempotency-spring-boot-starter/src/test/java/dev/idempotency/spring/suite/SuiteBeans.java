package dev.idempotency.spring.suite;

import dev.idempotency.spring.messaging.SwitchableKeyStore;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * The store and the provider of each of the suite's applications, unless the test registered ones
 * that outlive the application (a restart; {@link SuiteApplications} registers them).
 */
@Configuration(proxyBeanMethods = false)
class SuiteBeans {

  @Bean
  @ConditionalOnMissingBean
  SwitchableKeyStore switchableKeyStore() {
    return new SwitchableKeyStore();
  }

  @Bean
  @ConditionalOnMissingBean
  SuiteProvider suiteProvider() {
    return new SuiteProvider();
  }
}
