package dev.idempotency.reliability.app;

import dev.idempotency.SendContext;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.stereotype.Component;

/**
 * Sends one notification to the stand-in provider over HTTP: the run's key, the guard's provider
 * key and attempt, this process's instance number and when the sender started. Returns the
 * provider's message id; a failure of the provider or the network is an exception (the endpoint's
 * 5xx, which releases the key).
 */
@Component
public class ProviderClient {

  private final HttpClient http =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
  private final URI url;
  private final int instance;

  ProviderClient(@Value("${provider.url}") String url, @Value("${instance}") int instance) {
    this.url = URI.create(url);
    this.instance = instance;
  }

  /** Sends and returns the provider's message id. */
  String send(String key, SendContext context) {
    String form =
        "key="
            + URLEncoder.encode(key, StandardCharsets.UTF_8)
            + "&providerKey="
            + URLEncoder.encode(context.providerKey(), StandardCharsets.UTF_8)
            + "&attempt="
            + context.attempt()
            + "&instance="
            + instance
            + "&start="
            + System.currentTimeMillis();
    HttpRequest request =
        HttpRequest.newBuilder(url)
            .timeout(Duration.ofSeconds(20))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .POST(HttpRequest.BodyPublishers.ofString(form))
            .build();
    try {
      HttpResponse<String> response = http.send(request, HttpResponse.BodyHandlers.ofString());
      if (response.statusCode() != 200) {
        throw new IllegalStateException("the provider answered " + response.statusCode());
      }
      return response.body();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while sending", e);
    }
  }
}
