package dev.idempotency.examples.webflux;

import static org.assertj.core.api.Assertions.assertThat;

import java.lang.reflect.Method;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The class path {@code mvn -pl examples-webflux -am compile exec:java} (docs/examples.md) runs the
 * application with: the runtime scope, which Maven writes to {@code target/run-class-path.txt}. The
 * application's own test runs with provided and test jars too, so a jar that only the run misses
 * (JSpecify, provided in the parent: the start failed with {@code NoClassDefFoundError:
 * org/jspecify/annotations/Nullable}) goes unseen there.
 */
class RunClassPathTest {

  @Test
  void springResolvesAHandlerParametersNullnessOnTheRunClassPath() throws Exception {
    List<URL> urls = new ArrayList<>();
    urls.add(Path.of("target", "classes").toUri().toURL());
    String runClassPath = Files.readString(Path.of("target", "run-class-path.txt")).strip();
    for (String entry : runClassPath.split(java.io.File.pathSeparator)) {
      urls.add(Path.of(entry).toUri().toURL());
    }

    try (URLClassLoader run =
        new URLClassLoader(urls.toArray(URL[]::new), ClassLoader.getPlatformClassLoader())) {
      Class<?> controller = Class.forName(NotifyController.class.getName(), false, run);
      Method notify = handler(controller);
      Class<?> methodParameter =
          Class.forName("org.springframework.core.MethodParameter", true, run);
      Object body = methodParameter.getConstructor(Method.class, int.class).newInstance(notify, 0);

      // what Spring asks of every injected parameter at startup: on Spring Framework 7 it reads
      // JSpecify's annotations, and fails with NoClassDefFoundError when that jar is missing
      Object optional = methodParameter.getMethod("isOptional").invoke(body);

      assertThat(optional).isEqualTo(false);
    }
  }

  private static Method handler(Class<?> controller) {
    for (Method method : controller.getDeclaredMethods()) {
      if (method.getName().equals("notify")) {
        return method;
      }
    }
    throw new AssertionError("no notify method on " + controller);
  }
}
