package dev.idempotency.spring.web;

import jakarta.servlet.http.Part;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.jspecify.annotations.Nullable;

/**
 * A part of a multipart request as the starter's request wrapper ({@link BodyCachingRequest}) hands
 * it out: a plain pass-through to the container's part, until the container ends a request whose
 * work goes on without it. Then ({@link #copyForTheWork}) its content is copied to a file of its
 * own, before the container deletes the part's, and read from there until the call's outcome is
 * known ({@link #deleteCopy}). Thread-safe: the copy is made on the container's thread while the
 * work may read.
 */
final class UploadedPart implements Part {

  private final Part part;
  private volatile @Nullable Copy copy;

  /** The part as it was when the request ended: its content in a file of the starter's. */
  private record Copy(
      Path file,
      String name,
      @Nullable String submittedFileName,
      @Nullable String contentType,
      long size,
      Map<String, List<String>> headers,
      @Nullable File location) {}

  UploadedPart(Part part) {
    this.part = part;
  }

  /** The size of the container's part, as it was parsed. */
  long containerSize() {
    return part.getSize();
  }

  /**
   * Copies the part's content to a temporary file of its own (its owner's only, on POSIX), which it
   * reads from from now on; the part's name, file name, type, size and headers are kept with it.
   * Called while the request is still valid.
   *
   * @param location where {@link #write} puts a file named by a relative path, as the container
   *     would (its temporary directory), or null if it has none
   * @throws IOException if the content could not be copied (then nothing is kept, and the part
   *     still reads the container's)
   */
  void copyForTheWork(@Nullable File location) throws IOException {
    if (copy != null) {
      return;
    }
    Path file = Files.createTempFile("idempotency-upload-", ".tmp");
    try {
      try (InputStream in = part.getInputStream()) {
        Files.copy(in, file, StandardCopyOption.REPLACE_EXISTING);
      }
      Map<String, List<String>> headers = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);
      for (String name : part.getHeaderNames()) {
        headers.put(name, List.copyOf(part.getHeaders(name)));
      }
      copy =
          new Copy(
              file,
              part.getName(),
              part.getSubmittedFileName(),
              part.getContentType(),
              Files.size(file),
              headers,
              location);
    } catch (IOException | RuntimeException e) {
      Files.deleteIfExists(file);
      throw e;
    }
  }

  /** Deletes the copy, if one was made: the work that read it ended. */
  void deleteCopy() throws IOException {
    Copy copied = copy;
    if (copied != null) {
      Files.deleteIfExists(copied.file());
    }
  }

  @Override
  public InputStream getInputStream() throws IOException {
    Copy copied = copy;
    return copied == null ? part.getInputStream() : Files.newInputStream(copied.file());
  }

  @Override
  public @Nullable String getContentType() {
    Copy copied = copy;
    return copied == null ? part.getContentType() : copied.contentType();
  }

  @Override
  public String getName() {
    Copy copied = copy;
    return copied == null ? part.getName() : copied.name();
  }

  @Override
  public @Nullable String getSubmittedFileName() {
    Copy copied = copy;
    return copied == null ? part.getSubmittedFileName() : copied.submittedFileName();
  }

  @Override
  public long getSize() {
    Copy copied = copy;
    return copied == null ? part.getSize() : copied.size();
  }

  /**
   * Writes the content to {@code fileName}; once copied, a relative name is resolved against the
   * container's temporary directory, as the container does when no multipart location is set.
   */
  @Override
  public void write(String fileName) throws IOException {
    Copy copied = copy;
    if (copied == null) {
      part.write(fileName);
      return;
    }
    Path target = Path.of(fileName);
    if (!target.isAbsolute() && copied.location() != null) {
      target = copied.location().toPath().resolve(target);
    }
    Files.copy(copied.file(), target, StandardCopyOption.REPLACE_EXISTING);
  }

  @Override
  public void delete() throws IOException {
    if (copy == null) {
      part.delete();
    } else {
      deleteCopy();
    }
  }

  @Override
  public @Nullable String getHeader(String name) {
    Copy copied = copy;
    if (copied == null) {
      return part.getHeader(name);
    }
    List<String> values = copied.headers().get(name);
    return values == null || values.isEmpty() ? null : values.get(0);
  }

  @Override
  public Collection<String> getHeaders(String name) {
    Copy copied = copy;
    return copied == null
        ? part.getHeaders(name)
        : new ArrayList<>(copied.headers().getOrDefault(name, List.of()));
  }

  @Override
  public Collection<String> getHeaderNames() {
    Copy copied = copy;
    return copied == null ? part.getHeaderNames() : new ArrayList<>(copied.headers().keySet());
  }
}
