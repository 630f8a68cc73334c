package dev.idempotency.micrometer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.inmemory.InMemoryKeyStore;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The Grafana dashboard and the Prometheus alert rules in {@code docs/} use only metric names this
 * module emits, as Micrometer's Prometheus registry writes them.
 */
class DashboardTest {

  private static final Pattern METRIC = Pattern.compile("idempotency_[a-z_]+");
  private static final Path DOCS =
      Path.of(System.getProperty("user.dir")).getParent().resolve("docs");

  /** Every metric name a Prometheus scrape shows after each meter was used. */
  static Set<String> emittedNames() {
    PrometheusMeterRegistry prometheus = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    IdempotencyGuard guard =
        IdempotencyGuard.builder()
            .store(InMemoryKeyStore.builder().build())
            .observer(MicrometerIdempotencyObserver.builder(prometheus).build())
            .build();
    guard.execute("otp:1", Duration.ofHours(1), ctx -> "n_1");
    guard.execute("otp:1", Duration.ofHours(1), ctx -> "n_1");
    catchThrowable(
        () ->
            guard.execute(
                "otp:2",
                Duration.ofHours(1),
                ctx -> {
                  throw new IllegalStateException("x");
                }));
    Set<String> names = new TreeSet<>();
    for (String line : prometheus.scrape().split("\n")) {
      if (!line.startsWith("#") && !line.isBlank()) {
        String name = line.split("[{ ]", 2)[0];
        names.add(name);
      }
    }
    return names;
  }

  static List<String> metricsIn(String text) {
    List<String> found = new ArrayList<>();
    Matcher matcher = METRIC.matcher(text);
    while (matcher.find()) {
      found.add(matcher.group());
    }
    return found;
  }

  @Test
  void theDashboardIsJsonAndUsesOnlyEmittedMetrics() throws Exception {
    Set<String> emitted = emittedNames();
    JsonNode dashboard =
        new ObjectMapper().readTree(DOCS.resolve("grafana/idempotency-dashboard.json").toFile());
    List<String> used = new ArrayList<>();
    for (JsonNode panel : dashboard.get("panels")) {
      for (JsonNode target : panel.get("targets")) {
        used.addAll(metricsIn(target.get("expr").asText()));
      }
    }

    assertThat(emitted)
        .contains(
            "idempotency_calls_total",
            "idempotency_send_seconds_count",
            "idempotency_store_seconds_bucket",
            "idempotency_calls_active");
    assertThat(used).isNotEmpty();
    assertThat(used).allSatisfy(name -> assertThat(emitted).contains(name));
  }

  @Test
  void theAlertRulesUseOnlyEmittedMetricsAndCoverTheSignals() throws Exception {
    Set<String> emitted = emittedNames();
    String rules =
        Files.readString(DOCS.resolve("prometheus/idempotency-alerts.yml"), StandardCharsets.UTF_8);
    List<String> expressions = new ArrayList<>();
    for (String line : rules.split("\n")) {
      String trimmed = line.strip();
      if (trimmed.startsWith("expr:")) {
        expressions.add(trimmed.substring(5));
      }
    }

    assertThat(expressions).hasSize(5);
    assertThat(String.join("\n", expressions))
        .contains("outcome=\"takeover\"")
        .contains("outcome=\"outcome_not_recorded\"")
        .contains("outcome=\"store_error\"")
        .contains("histogram_quantile(0.99");
    for (String expression : expressions) {
      assertThat(metricsIn(expression)).allSatisfy(name -> assertThat(emitted).contains(name));
    }
  }
}
