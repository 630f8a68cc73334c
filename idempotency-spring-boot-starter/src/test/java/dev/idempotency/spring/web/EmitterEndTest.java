package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import org.junit.jupiter.api.Test;
import org.springframework.web.servlet.mvc.method.annotation.ResponseBodyEmitter;
import org.springframework.web.servlet.mvc.method.annotation.SseEmitter;

/**
 * How {@link EmitterEnd} tells the application's own failure of an emitter from one that may follow
 * a send: a failure thrown by the emitter's {@code send} (here the real one, after the emitter
 * completed, as after a timeout), as itself, its cause or a suppressed exception, or one without a
 * stack trace, may follow a send; an error the application made of its own does not.
 */
class EmitterEndTest {

  @Test
  void theApplicationsOwnFailureDoesNotFollowASend() {
    assertThat(EmitterEnd.mayFollowASend(new IllegalStateException("the provider refused")))
        .isFalse();
  }

  @Test
  void aFailureOfTheEmittersSendMayFollowASend() {
    SseEmitter emitter = new SseEmitter();
    emitter.complete(); // as Spring MVC's timeout handling marks it
    Throwable failed = catchThrowable(() -> emitter.send(SseEmitter.event().data("sent-1")));
    assertThat(failed).isInstanceOf(IllegalStateException.class);

    assertThat(EmitterEnd.mayFollowASend(failed)).isTrue();
    assertThat(EmitterEnd.mayFollowASend(new RuntimeException("could not deliver", failed)))
        .isTrue();
    RuntimeException suppressing = new RuntimeException("the provider's receipt");
    suppressing.addSuppressed(failed);
    assertThat(EmitterEnd.mayFollowASend(suppressing)).isTrue();
  }

  @Test
  void aFailureWithoutAStackTraceMayFollowASend() {
    IllegalStateException traceless = new IllegalStateException("where from?");
    traceless.setStackTrace(new StackTraceElement[0]);
    assertThat(EmitterEnd.mayFollowASend(traceless)).isTrue();
  }

  @Test
  void anEmitterSpringMvcNeverInitializedIsNotObserved() {
    assertThat(EmitterEnd.observe(new ResponseBodyEmitter())).isNull();
  }
}
