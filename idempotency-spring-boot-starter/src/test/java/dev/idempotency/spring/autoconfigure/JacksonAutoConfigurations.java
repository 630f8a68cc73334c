package dev.idempotency.spring.autoconfigure;

/** Spring Boot's Jackson auto-configuration, found by its name on either Boot line. */
public final class JacksonAutoConfigurations {
  private JacksonAutoConfigurations() {}

  /** Boot 4's (Jackson 3) if present, else Boot 3.5's (Jackson 2). */
  public static Class<?> jackson() {
    for (String name :
        new String[] {
          "org.springframework.boot.jackson.autoconfigure.JacksonAutoConfiguration",
          "org.springframework.boot.autoconfigure.jackson.JacksonAutoConfiguration"
        }) {
      try {
        return Class.forName(name);
      } catch (ClassNotFoundException notOnThisLine) {
        // try the other
      }
    }
    throw new IllegalStateException("no Jackson auto-configuration on the classpath");
  }
}
