package dev.idempotency.spring.suite;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;

import dev.idempotency.spring.InvalidKeyException;
import dev.idempotency.spring.suite.SuiteWebFluxApplication.MonoSender;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.springframework.context.ConfigurableApplicationContext;
import reactor.core.publisher.Mono;

/**
 * An {@code @Idempotent} method returning {@code Mono} refuses an unsafe key as the {@code Mono}'s
 * error, not by throwing from the call that builds it: an application that handles the method's
 * errors on the {@code Mono} ({@code onErrorResume}, as {@link SuiteWebFluxApplication}'s handler
 * does) answers it (400), as the same key through {@code @Idempotent} on Spring MVC is. Before,
 * {@code InvalidKeyException} escaped the method call and WebFlux answered 500 (found by the suite,
 * an open finding until fixed).
 */
class MonoMethodUnsafeKeyTest extends HazardTest {

  @Test
  void theMonoMethodsUnsafeKeyReachesTheApplicationAsTheMonosError() {
    ConfigurableApplicationContext application = Stack.WEBFLUX.shared();
    MonoSender sender = application.getBean(MonoSender.class);
    String key = "k".repeat(2_000);
    AtomicReference<Mono<String>> built = new AtomicReference<>();
    assertThatCode(() -> built.set(sender.send(key)))
        .as("building the Mono does not throw")
        .doesNotThrowAnyException();
    Throwable signalled =
        built
            .get()
            .map(sent -> (Throwable) new AssertionError("sent: " + sent))
            .onErrorResume(Mono::just)
            .block(Duration.ofMinutes(1));
    assertThat(signalled).isInstanceOf(InvalidKeyException.class);
  }
}
