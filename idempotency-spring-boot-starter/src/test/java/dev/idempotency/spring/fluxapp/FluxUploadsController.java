package dev.idempotency.spring.fluxapp;

import dev.idempotency.spring.app.Runs;
import dev.idempotency.spring.web.IdempotentEndpoint;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.springframework.core.io.buffer.DataBufferUtils;
import org.springframework.http.MediaType;
import org.springframework.http.codec.multipart.FilePart;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestPart;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.server.ServerWebExchange;
import reactor.core.publisher.Mono;

/** A multipart upload and a form post, read the ordinary WebFlux ways. */
@RestController
public class FluxUploadsController {

  private final Runs runs;

  public FluxUploadsController(Runs runs) {
    this.runs = runs;
  }

  @PostMapping(value = "/uploads", consumes = MediaType.MULTIPART_FORM_DATA_VALUE)
  @IdempotentEndpoint
  public Mono<Map<String, Object>> upload(
      @RequestPart("file") FilePart file, @RequestPart("caption") String caption) {
    return DataBufferUtils.join(file.content())
        .map(
            buffer -> {
              String content = buffer.toString(StandardCharsets.UTF_8);
              DataBufferUtils.release(buffer);
              return Map.of(
                  "upload",
                  "u_" + runs.increment(),
                  "file",
                  file.filename(),
                  "content",
                  content,
                  "caption",
                  caption);
            });
  }

  @PostMapping(value = "/forms", consumes = MediaType.APPLICATION_FORM_URLENCODED_VALUE)
  @IdempotentEndpoint
  public Mono<Map<String, Object>> form(ServerWebExchange exchange) {
    return exchange
        .getFormData()
        .map(
            form ->
                Map.of(
                    "form",
                    "f_" + runs.increment(),
                    "recipient",
                    String.valueOf(form.getFirst("recipient")),
                    "text",
                    String.valueOf(form.getFirst("text"))));
  }
}
