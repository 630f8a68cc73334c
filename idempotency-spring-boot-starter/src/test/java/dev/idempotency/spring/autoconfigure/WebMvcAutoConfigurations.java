package dev.idempotency.spring.autoconfigure;

/** Spring Boot's Spring MVC auto-configuration, found by its name on either Boot line. */
public final class WebMvcAutoConfigurations {
  private WebMvcAutoConfigurations() {}

  /** Boot 4's if present, else Boot 3.5's. */
  public static Class<?> webMvc() {
    for (String name :
        new String[] {
          "org.springframework.boot.webmvc.autoconfigure.WebMvcAutoConfiguration",
          "org.springframework.boot.autoconfigure.web.servlet.WebMvcAutoConfiguration"
        }) {
      try {
        return Class.forName(name);
      } catch (ClassNotFoundException notOnThisLine) {
        // try the other
      }
    }
    throw new IllegalStateException("no Spring MVC auto-configuration on the classpath");
  }
}
