package dev.idempotency.spring.app;

import dev.idempotency.spring.web.IdempotentEndpoint;
import jakarta.servlet.http.HttpServletResponse;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.servlet.mvc.method.annotation.ResponseBodyEmitter;
import org.springframework.web.servlet.mvc.method.annotation.SseEmitter;
import org.springframework.web.servlet.mvc.method.annotation.StreamingResponseBody;

/**
 * Spring MVC handlers that stream their response (server-sent events, NDJSON, a {@code
 * StreamingResponseBody}), driven by the test: each run hands its emitter (or the queue its body is
 * written from) to the test, so "before the stream ended" is a fact, not a guess about speed.
 */
@RestController
public class StreamingController {

  /** What a {@code StreamingResponseBody} writes last: the end of its body. */
  public static final String END = "\u0000end";

  private static final long WAIT_SECONDS = 30;

  private final Runs runs;
  private final Map<String, AtomicInteger> runsById = new ConcurrentHashMap<>();
  private final Map<String, BlockingQueue<ResponseBodyEmitter>> emitters =
      new ConcurrentHashMap<>();
  private final Map<String, BlockingQueue<String>> chunks = new ConcurrentHashMap<>();
  private final Map<String, CountDownLatch> heldDispatches = new ConcurrentHashMap<>();

  public StreamingController(Runs runs) {
    this.runs = runs;
  }

  /** How often a handler ran for {@code id}. */
  public int runs(String id) {
    return runsById.computeIfAbsent(id, ignored -> new AtomicInteger()).get();
  }

  /** The emitter of the next run for {@code id}, once its handler returned it (bounded wait). */
  public <T extends ResponseBodyEmitter> T emitter(String id, Class<T> type)
      throws InterruptedException {
    ResponseBodyEmitter emitter = queue(emitters, id).poll(WAIT_SECONDS, TimeUnit.SECONDS);
    if (emitter == null) {
      throw new IllegalStateException("no handler for " + id + " ran within " + WAIT_SECONDS + "s");
    }
    return type.cast(emitter);
  }

  /** Has the {@code StreamingResponseBody} for {@code id} write {@code chunk} and flush. */
  public void write(String id, String chunk) {
    queue(chunks, id).add(chunk);
  }

  /**
   * Lets the first dispatch of the request for {@code id} to {@code /streams/held/{id}} return: it
   * waits, once its handler returned its emitter and Spring MVC started it, until this is called
   * ({@link #awaitDispatchRelease}).
   */
  public void releaseDispatch(String id) {
    heldDispatch(id).countDown();
  }

  /**
   * Holds the container's thread in the first dispatch of the request for {@code id} until the test
   * lets it go ({@link #releaseDispatch}), at most 30 s; called by the test application's filter
   * for {@code /streams/held/*} once the request's async processing started.
   */
  public void awaitDispatchRelease(String id) throws InterruptedException {
    if (!heldDispatch(id).await(WAIT_SECONDS, TimeUnit.SECONDS)) {
      throw new IllegalStateException("the dispatch for " + id + " was not let go within 30s");
    }
  }

  private CountDownLatch heldDispatch(String id) {
    return heldDispatches.computeIfAbsent(id, ignored -> new CountDownLatch(1));
  }

  private static <T> BlockingQueue<T> queue(Map<String, BlockingQueue<T>> queues, String id) {
    return queues.computeIfAbsent(id, ignored -> new LinkedBlockingQueue<>());
  }

  private void ran(String id) {
    runs.increment();
    runsById.computeIfAbsent(id, ignored -> new AtomicInteger()).incrementAndGet();
  }

  @PostMapping(path = "/streams/events/{id}", produces = MediaType.TEXT_EVENT_STREAM_VALUE)
  @IdempotentEndpoint
  public SseEmitter events(@PathVariable String id) {
    ran(id);
    SseEmitter emitter = new SseEmitter(TimeUnit.SECONDS.toMillis(60));
    queue(emitters, id).add(emitter);
    return emitter;
  }

  /**
   * As {@link #events}; the request's first dispatch is held after the handler returned (the test
   * application's filter, {@link #awaitDispatchRelease}), so the emitter sends while the
   * container's thread is still in the request.
   */
  @PostMapping(path = "/streams/held/{id}", produces = MediaType.TEXT_EVENT_STREAM_VALUE)
  @IdempotentEndpoint
  public SseEmitter heldEvents(@PathVariable String id) {
    return events(id);
  }

  /** An emitter whose own timeout (1 s) ends its stream. */
  @PostMapping(path = "/streams/short/{id}", produces = MediaType.TEXT_EVENT_STREAM_VALUE)
  @IdempotentEndpoint
  public SseEmitter shortEvents(@PathVariable String id) {
    ran(id);
    SseEmitter emitter = new SseEmitter(1_000L);
    queue(emitters, id).add(emitter);
    return emitter;
  }

  @PostMapping("/streams/ndjson/{id}")
  @IdempotentEndpoint
  public ResponseEntity<ResponseBodyEmitter> ndjson(@PathVariable String id) {
    ran(id);
    ResponseBodyEmitter emitter = new ResponseBodyEmitter(TimeUnit.SECONDS.toMillis(60));
    queue(emitters, id).add(emitter);
    return ResponseEntity.ok().contentType(MediaType.APPLICATION_NDJSON).body(emitter);
  }

  /**
   * No streaming content type: a stream because of what it returns. It flushes the response, not
   * only its stream: Spring Framework 7 hands a {@code StreamingResponseBody} a stream whose {@code
   * flush()} does nothing (unless {@code spring.http.response.flush.enabled}).
   */
  @PostMapping("/streams/body/{id}")
  @IdempotentEndpoint
  public StreamingResponseBody body(@PathVariable String id, HttpServletResponse response) {
    ran(id);
    BlockingQueue<String> queue = queue(chunks, id);
    return (OutputStream out) -> {
      while (true) {
        String chunk;
        try {
          chunk = queue.poll(WAIT_SECONDS, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          return;
        }
        if (chunk == null || END.equals(chunk)) {
          return;
        }
        out.write(chunk.getBytes(StandardCharsets.UTF_8));
        out.flush();
        response.flushBuffer();
      }
    };
  }
}
