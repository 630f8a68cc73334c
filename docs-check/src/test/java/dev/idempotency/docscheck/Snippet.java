package dev.idempotency.docscheck;

import java.util.List;

/**
 * One {@code ```java} block of a Markdown page, with the directives in the HTML comments just above
 * it.
 *
 * @param page the page, as shown in failure messages (a path relative to the repository's root)
 * @param fenceLine the 1-based line of the opening fence
 * @param lines the block's lines, without the fences and without the fence's indentation
 * @param kind how the block is compiled
 * @param context the declarations of {@code <!-- snippet-context: ... -->}, empty if none
 * @param contextLine the 1-based line where the context comment starts, or 0
 * @param reason why a block is not compiled ({@link Kind#NOT_COMPILED}), empty otherwise
 */
record Snippet(
    String page,
    int fenceLine,
    List<String> lines,
    Kind kind,
    List<String> context,
    int contextLine,
    String reason) {

  /** How a block is compiled; see the class comment of {@link SnippetCompiler}. */
  enum Kind {
    /** A compilation unit if it declares a top-level type, statements otherwise (the default). */
    AUTO,
    /** A whole compilation unit: imports and top-level types. */
    UNIT,
    /** Statements: the body of a method of a generated class. */
    STATEMENTS,
    /** Members (methods, fields, nested types): the body of a generated class. */
    MEMBERS,
    /** Shown, never compiled: a deliberately wrong example. Counted and asserted by the test. */
    NOT_COMPILED
  }

  /** The 1-based line in the page of the block's {@code index}-th line (0-based). */
  int pageLine(int index) {
    return fenceLine + 1 + index;
  }

  /** {@code page:line} of the opening fence. */
  String location() {
    return page + ":" + fenceLine;
  }
}
