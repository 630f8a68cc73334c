package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.springframework.web.servlet.mvc.method.annotation.ResponseBodyEmitter;
import org.springframework.web.servlet.mvc.method.annotation.SseEmitter;

/**
 * How {@link EmitterEnd} tells the application's own failure of an emitter from one that may follow
 * a send: a failure thrown by the emitter's {@code send} (here the real one, after the emitter
 * completed, as after a timeout), as itself, its cause or a suppressed exception, or one without a
 * stack trace, may follow a send; an error the application made of its own does not. And how it
 * follows an emitter Spring MVC never got ({@link EmitterEnd#follow}).
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

  /**
   * An emitter Spring MVC never got (its {@code Callable} outlived its request) is started by the
   * starter and followed: the application's own failure before any send is its end (released).
   */
  @Test
  void aFollowedEmittersOwnFailureBeforeAnySendIsItsEnd() {
    SseEmitter emitter = new SseEmitter();
    EmitterEnd end = EmitterEnd.follow(emitter);
    assertThat(end).isNotNull();
    CompletableFuture<Throwable> ended = new CompletableFuture<>();
    end.whenEnded(ended::complete);
    IllegalStateException refused = new IllegalStateException("the provider refused");
    emitter.completeWithError(refused);
    assertThat(ended).isCompletedWithValue(refused);
    assertThat(end.sent()).isFalse();
  }

  /** A send (one made before the starter followed it, too) is heard, then the normal end. */
  @Test
  void aFollowedEmittersSendIsHeard() throws Exception {
    SseEmitter emitter = new SseEmitter();
    emitter.send(SseEmitter.event().data("sent-1")); // before it is followed: kept by the emitter
    EmitterEnd end = EmitterEnd.follow(emitter);
    assertThat(end).isNotNull();
    assertThat(end.sent()).isTrue();
    CompletableFuture<Throwable> ended = new CompletableFuture<>();
    end.whenEnded(ended::complete);
    emitter.send(SseEmitter.event().data("sent-2")); // dropped: there is no response
    emitter.complete();
    assertThat(ended).isCompletedWithValue(null);
    assertThat(end.sent()).isTrue();
  }

  /**
   * One the application ended before the starter followed it ends at once, with its own failure,
   * and is followed once only; the completion callback of one followed runs at its end.
   */
  @Test
  void aFollowedEmitterEndedAlreadyEndsAtOnce() {
    SseEmitter emitter = new SseEmitter();
    AtomicBoolean completed = new AtomicBoolean();
    emitter.onCompletion(() -> completed.set(true));
    IllegalStateException refused = new IllegalStateException("the provider refused");
    emitter.completeWithError(refused);
    EmitterEnd end = EmitterEnd.follow(emitter);
    assertThat(end).isNotNull();
    CompletableFuture<Throwable> ended = new CompletableFuture<>();
    end.whenEnded(ended::complete);
    assertThat(ended).isCompletedWithValue(refused);
    assertThat(EmitterEnd.follow(emitter)).isNull();

    SseEmitter later = new SseEmitter();
    later.onCompletion(() -> completed.set(true));
    assertThat(EmitterEnd.follow(later)).isNotNull();
    later.complete();
    assertThat(completed).isTrue();
  }
}
