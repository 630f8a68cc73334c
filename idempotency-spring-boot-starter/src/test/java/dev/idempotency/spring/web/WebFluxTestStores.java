package dev.idempotency.spring.web;

import dev.idempotency.spring.EmbeddedServers;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import java.util.Map;
import javax.sql.DataSource;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.datasource.DriverManagerDataSource;

/**
 * The real stores of WebFlux test applications (first written for the adversarial probes of branch
 * probe39c), for applications built without Boot's Redis and JDBC auto-configurations: a {@code
 * RedisClient} on the embedded Redis, a {@code DataSource} on the embedded PostgreSQL.
 */
final class WebFluxTestStores {

  private WebFluxTestStores() {}

  static final Map<String, Object> REDIS = Map.of("idempotency.store", "redis");

  static final Map<String, Object> POSTGRES =
      Map.of("idempotency.store", "jdbc", "idempotency.jdbc.initialize-schema", "always");

  @Configuration(proxyBeanMethods = false)
  static class OnRedis {
    @Bean(destroyMethod = "shutdown")
    RedisClient redisClient() {
      return RedisClient.create(RedisURI.create("127.0.0.1", EmbeddedServers.redisPort()));
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class OnPostgres {
    @Bean
    DataSource dataSource() {
      return new DriverManagerDataSource(EmbeddedServers.postgresUrl());
    }
  }
}
