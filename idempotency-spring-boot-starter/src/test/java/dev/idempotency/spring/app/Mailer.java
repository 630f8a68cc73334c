package dev.idempotency.spring.app;

import dev.idempotency.SendContext;
import dev.idempotency.spring.Idempotent;
import java.io.IOException;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.atomic.AtomicInteger;
import org.springframework.stereotype.Service;

/** Bean methods with @Idempotent, counting how often each really ran. */
@Service
public class Mailer {

  private final AtomicInteger runs = new AtomicInteger();

  /** How often the methods really ran (a method, since the bean is a proxy). */
  public int runs() {
    return runs.get();
  }

  @Idempotent(key = "#orderId")
  public Receipt send(String orderId) {
    return new Receipt("r-" + orderId + "-" + runs.incrementAndGet(), "email", 1);
  }

  @Idempotent(key = "#orderId")
  public Receipt sendAgainUnderAnotherName(String orderId) {
    return new Receipt("other-" + orderId + "-" + runs.incrementAndGet(), "email", 2);
  }

  @Idempotent(name = "order-shipped-email", key = "#event.orderId()", ttl = "PT72H")
  public List<Receipt> shipped(OrderShipped event) {
    runs.incrementAndGet();
    return List.of(new Receipt("a-" + event.orderId(), "email", 1), new Receipt("b", "sms", 2));
  }

  @Idempotent(key = "#p0")
  public Optional<Receipt> maybe(String id, boolean present) {
    runs.incrementAndGet();
    return present ? Optional.of(new Receipt(id, "push", 1)) : Optional.empty();
  }

  @Idempotent(key = "#id")
  public Receipt nothing(String id) {
    runs.incrementAndGet();
    return null;
  }

  @Idempotent(key = "#id")
  public void fireAndForget(String id) {
    runs.incrementAndGet();
  }

  @Idempotent(key = "#id")
  public int count(String id) {
    return runs.incrementAndGet();
  }

  @Idempotent(key = "#id")
  public CompletableFuture<Receipt> sendLater(String id) {
    int run = runs.incrementAndGet();
    return CompletableFuture.supplyAsync(() -> new Receipt("later-" + id + "-" + run, "sms", 1));
  }

  @Idempotent(key = "#id")
  public CompletionStage<List<Receipt>> stage(String id) {
    int run = runs.incrementAndGet();
    return CompletableFuture.completedFuture(List.of(new Receipt("stage-" + run, "sms", 1)));
  }

  @Idempotent(key = "#id")
  public CompletableFuture<Receipt> failLater(String id) {
    runs.incrementAndGet();
    return CompletableFuture.failedFuture(new IOException("provider down for " + id));
  }

  @Idempotent(key = "#id")
  public Receipt failChecked(String id) throws IOException {
    runs.incrementAndGet();
    throw new IOException("provider down for " + id);
  }

  @Idempotent(key = "#id")
  public Receipt failUnchecked(String id) {
    runs.incrementAndGet();
    throw new IllegalStateException("bug for " + id);
  }

  /** What a provider client's log lines would carry in the MDC while this sends. */
  @Idempotent(name = "otp-sms", key = "#id")
  public String mdc(String id) {
    runs.incrementAndGet();
    return org.slf4j.MDC.get("idempotency.operation")
        + " "
        + org.slf4j.MDC.get("idempotency.attempt")
        + " "
        + org.slf4j.MDC.get("idempotency.key");
  }

  /** A text message; a repeat with another text under the same id is not the same call. */
  public record Message(String id, String phone, String text, long userId) {}

  @Idempotent(key = "#message.id()", fingerprint = "#message")
  public String sendMessage(Message message) {
    return "sent " + message.text() + " #" + runs.incrementAndGet();
  }

  @Idempotent(key = "#id", ttl = "72h")
  public Receipt remind(String id) {
    return new Receipt("remind-" + id + "-" + runs.incrementAndGet(), "email", 1);
  }

  /** The guard hands the method its context, whatever the caller passed. */
  @Idempotent(key = "#id")
  public String withContext(String id, SendContext context) {
    runs.incrementAndGet();
    return context.providerKey() + " " + context.attempt();
  }

  /** A thread-local of the caller, as a security context is. */
  public static final ThreadLocal<String> CALLER = new ThreadLocal<>();

  /**
   * What the body of a stage-returning method sees of its caller: its thread, MDC, request
   * attributes and thread-locals, read before the stage is returned.
   */
  @Idempotent(key = "#id")
  public CompletableFuture<String> contextual(String id) {
    runs.incrementAndGet();
    org.springframework.web.context.request.RequestAttributes request =
        org.springframework.web.context.request.RequestContextHolder.getRequestAttributes();
    String seen =
        Thread.currentThread().getName()
            + "|"
            + org.slf4j.MDC.get("request-id")
            + "|"
            + (request == null
                ? null
                : request.getAttribute(
                    "tenant",
                    org.springframework.web.context.request.RequestAttributes.SCOPE_REQUEST))
            + "|"
            + CALLER.get()
            + "|"
            + org.slf4j.MDC.get("idempotency.operation");
    return CompletableFuture.supplyAsync(() -> seen);
  }

  /** Calls {@link #send} on itself: not through the proxy, so not guarded. */
  public Receipt sendFromInside(String orderId) {
    return send(orderId);
  }

  /** An event with an order id. */
  public record OrderShipped(String orderId, String userId) {}
}
