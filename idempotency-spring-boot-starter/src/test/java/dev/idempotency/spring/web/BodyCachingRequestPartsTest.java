package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import jakarta.servlet.MultipartConfigElement;
import jakarta.servlet.ServletContext;
import jakarta.servlet.http.Part;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.mock.web.MockHttpServletRequest;
import org.springframework.web.context.support.StaticWebApplicationContext;
import org.springframework.web.servlet.DispatcherServlet;

/**
 * The parts {@link BodyCachingRequest} hands out ({@link UploadedPart}): a pass-through to the
 * container's while the request lives; copied for work that outlives it ({@code
 * outlivedByItsWork}), within the application's multipart limits, and the copies deleted at the end
 * ({@code deleteCopies}). The container's part here is a file on disk that the test deletes, as
 * Tomcat deletes its upload file when it recycles the request.
 */
class BodyCachingRequestPartsTest {

  @TempDir Path dir;

  @Test
  void partsPassThroughWhileTheRequestLives() throws Exception {
    FilePart container = new FilePart(dir, "file", "a.txt", "the attachment");
    BodyCachingRequest request = new BodyCachingRequest(multipart(container));

    Collection<Part> parts = request.getParts();
    assertThat(parts).hasSize(1);
    Part part = parts.iterator().next();
    assertThat(request.getParts()).containsExactly(part); // the same wrapper every time
    assertThat(request.getPart("file")).isSameAs(part);
    assertThat(request.getPart("other")).isNull();
    assertThat(part.getName()).isEqualTo("file");
    assertThat(part.getSubmittedFileName()).isEqualTo("a.txt");
    assertThat(part.getContentType()).isEqualTo("text/plain");
    assertThat(part.getSize()).isEqualTo(14);
    assertThat(part.getHeader("content-type")).isEqualTo("text/plain");
    assertThat(read(part)).isEqualTo("the attachment");

    part.delete(); // the container's, as on time
    assertThat(container.file).doesNotExist();
  }

  @Test
  void workThatOutlivesTheRequestReadsACopyDeletedAtTheEnd() throws Exception {
    FilePart container = new FilePart(dir, "file", "a.txt", "the attachment");
    MockHttpServletRequest raw = multipart(container);
    raw.getServletContext().setAttribute(ServletContext.TEMPDIR, dir.toFile());
    BodyCachingRequest request = new BodyCachingRequest(raw);
    Part part = request.getPart("file");

    request.outlivedByItsWork();
    Files.delete(container.file); // the container recycles the request

    assertThat(read(part)).isEqualTo("the attachment");
    assertThat(part.getName()).isEqualTo("file");
    assertThat(part.getSubmittedFileName()).isEqualTo("a.txt");
    assertThat(part.getContentType()).isEqualTo("text/plain");
    assertThat(part.getSize()).isEqualTo(14);
    assertThat(part.getHeaders("Content-Type")).containsExactly("text/plain");
    assertThat(request.getPart("file")).isSameAs(part); // not the ended request's (none)
    part.write("written.txt"); // relative: in the container's temporary directory
    assertThat(dir.resolve("written.txt")).hasContent("the attachment");

    request.deleteCopies();
    assertThatThrownBy(() -> read(part)).isInstanceOf(NoSuchFileException.class);
  }

  @Test
  void partsOverTheApplicationsLimitsAreNotCopied() throws Exception {
    FilePart container = new FilePart(dir, "file", "a.txt", "the attachment");
    MockHttpServletRequest raw = multipart(container);
    StaticWebApplicationContext context = new StaticWebApplicationContext();
    context.registerBean(
        MultipartConfigElement.class, () -> new MultipartConfigElement("", 10, 10, 0));
    context.refresh();
    raw.setAttribute(DispatcherServlet.WEB_APPLICATION_CONTEXT_ATTRIBUTE, context);
    BodyCachingRequest request = new BodyCachingRequest(raw);
    Part part = request.getPart("file");

    request.outlivedByItsWork();
    Files.delete(container.file);

    assertThatThrownBy(() -> read(part)).isInstanceOf(NoSuchFileException.class);
  }

  @Test
  void aRequestWhosePartsWereNeverReadCopiesNothing() throws Exception {
    FilePart container = new FilePart(dir, "file", "a.txt", "the attachment");
    BodyCachingRequest request = new BodyCachingRequest(multipart(container));

    request.outlivedByItsWork();

    assertThat(container.reads).isZero();
  }

  private static MockHttpServletRequest multipart(Part part) {
    MockHttpServletRequest request = new MockHttpServletRequest("POST", "/upload");
    request.setContentType("multipart/form-data; boundary=x");
    request.addPart(part);
    return request;
  }

  private static String read(Part part) throws IOException {
    try (InputStream in = part.getInputStream()) {
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }
  }

  /** A part whose content is a file on disk, as Tomcat's is with Boot's file-size-threshold 0. */
  private static final class FilePart implements Part {
    final Path file;
    final String name;
    final String fileName;
    int reads;

    FilePart(Path dir, String name, String fileName, String content) throws IOException {
      this.file = Files.createTempFile(dir, "upload_", ".tmp");
      Files.writeString(file, content);
      this.name = name;
      this.fileName = fileName;
    }

    @Override
    public InputStream getInputStream() throws IOException {
      reads++;
      return Files.newInputStream(file);
    }

    @Override
    public String getContentType() {
      return "text/plain";
    }

    @Override
    public String getName() {
      return name;
    }

    @Override
    public String getSubmittedFileName() {
      return fileName;
    }

    @Override
    public long getSize() {
      try {
        return Files.size(file);
      } catch (IOException e) {
        return 0;
      }
    }

    @Override
    public void write(String fileName) throws IOException {
      Files.copy(file, file.resolveSibling(fileName));
    }

    @Override
    public void delete() throws IOException {
      Files.deleteIfExists(file);
    }

    @Override
    public String getHeader(String name) {
      return name.equalsIgnoreCase("Content-Type") ? getContentType() : null;
    }

    @Override
    public Collection<String> getHeaders(String name) {
      String value = getHeader(name);
      return value == null ? List.of() : List.of(value);
    }

    @Override
    public Collection<String> getHeaderNames() {
      return new ArrayList<>(List.of("Content-Type"));
    }
  }
}
