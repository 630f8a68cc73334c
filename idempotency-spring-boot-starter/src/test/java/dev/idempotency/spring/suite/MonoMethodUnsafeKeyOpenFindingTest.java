package dev.idempotency.spring.suite;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;

import dev.idempotency.spring.InvalidKeyException;
import dev.idempotency.spring.suite.SuiteWebFluxApplication.MonoSender;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.context.ConfigurableApplicationContext;
import reactor.core.publisher.Mono;

/**
 * OPEN FINDING (fails on purpose; tag {@code open-finding}, left out of the default build): an
 * {@code @Idempotent} method returning {@code Mono} refuses an unsafe key by throwing {@link
 * InvalidKeyException} from the call that builds the {@code Mono}, instead of returning a {@code
 * Mono} that signals it. Nothing is sent and the message is clear, but an application that handles
 * the method's errors on the {@code Mono} ({@code onErrorResume}, as {@link
 * SuiteWebFluxApplication}'s handler does) never sees the refusal: WebFlux answers 500, where the
 * same key through {@code @Idempotent} on Spring MVC, or a store outage through this method, is
 * answered as the application chose (400, 503). Seen on {@code IdempotentInvoker.invoke}, which
 * builds the guard key before choosing {@code MonoCalls.guarded}.
 */
@Tag("open-finding")
class MonoMethodUnsafeKeyOpenFindingTest extends HazardTest {

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

  @Test
  void theMonoMethodRefusesAnUnsafeKeyWith400OverHttp() throws Exception {
    UnsafeKeyHazardTest.assertRefusedClearly(HttpEntryPoint.MONO_METHOD);
  }
}
