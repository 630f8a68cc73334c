package dev.idempotency.spring.app;

import dev.idempotency.spring.web.IdempotentEndpoint;
import java.io.IOException;
import java.util.Map;
import org.springframework.http.MediaType;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RequestPart;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.multipart.MultipartFile;

/** A multipart upload and a form post, read the ordinary Spring ways. */
@RestController
public class UploadsController {

  private final Runs runs;

  public UploadsController(Runs runs) {
    this.runs = runs;
  }

  @PostMapping(value = "/uploads", consumes = MediaType.MULTIPART_FORM_DATA_VALUE)
  @IdempotentEndpoint
  public Map<String, Object> upload(
      @RequestPart("file") MultipartFile file, @RequestParam("caption") String caption)
      throws IOException {
    return Map.of(
        "upload",
        "u_" + runs.increment(),
        "file",
        String.valueOf(file.getOriginalFilename()),
        "content",
        new String(file.getBytes(), java.nio.charset.StandardCharsets.UTF_8),
        "caption",
        caption);
  }

  @PostMapping(value = "/forms", consumes = MediaType.APPLICATION_FORM_URLENCODED_VALUE)
  @IdempotentEndpoint
  public Map<String, Object> form(@RequestParam String recipient, @RequestParam String text) {
    return Map.of("form", "f_" + runs.increment(), "recipient", recipient, "text", text);
  }
}
