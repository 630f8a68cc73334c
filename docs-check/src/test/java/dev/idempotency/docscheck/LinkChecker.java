package dev.idempotency.docscheck;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Checks the relative links of the documentation: the file or directory a link names exists in the
 * repository, and an {@code #anchor} names a heading (or {@code <a id>}) of the target page, by
 * GitHub's slug rules. Links to other sites are not followed.
 */
final class LinkChecker {

  private final Path root;
  private final Map<Path, List<String>> anchors = new HashMap<>();

  LinkChecker(Path root) {
    this.root = root.toAbsolutePath().normalize();
  }

  /** The broken links of a page, each as {@code page:line: message}. */
  List<String> check(Path file) {
    Path page = file.toAbsolutePath().normalize();
    MarkdownPage markdown = MarkdownPage.read(root, page);
    List<String> broken = new ArrayList<>();
    for (MarkdownPage.Link link : markdown.links()) {
      String target = link.target();
      if (target.matches("^[a-zA-Z][a-zA-Z0-9+.-]*:.*")) {
        continue; // https:, mailto:: another site
      }
      int hash = target.indexOf('#');
      String pathPart = hash < 0 ? target : target.substring(0, hash);
      String anchor = hash < 0 ? null : target.substring(hash + 1);
      Path resolved = pathPart.isEmpty() ? page : page.getParent().resolve(pathPart).normalize();
      String where = markdown.path() + ":" + link.line() + ": link " + target;
      if (!resolved.startsWith(root)) {
        broken.add(where + ": leaves the repository");
        continue;
      }
      if (!Files.exists(resolved)) {
        broken.add(where + ": no such file " + root.relativize(resolved));
        continue;
      }
      if (anchor != null) {
        if (!resolved.toString().endsWith(".md")) {
          broken.add(where + ": an anchor into a file that is not Markdown");
        } else if (!anchorsOf(resolved).contains(anchor)) {
          broken.add(
              where + ": no heading with anchor #" + anchor + " in " + root.relativize(resolved));
        }
      }
    }
    return broken;
  }

  private List<String> anchorsOf(Path page) {
    return anchors.computeIfAbsent(page, p -> MarkdownPage.read(root, p).anchors());
  }
}
