package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import jakarta.servlet.RequestDispatcher;
import jakarta.servlet.http.HttpServletRequest;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.springframework.mock.web.MockHttpServletRequest;
import org.springframework.mock.web.MockHttpServletResponse;
import org.springframework.mock.web.MockServletContext;

/**
 * The copy of an ended request ({@link EndedRequest}) answers {@code getRequestDispatcher} from the
 * servlet context, a relative path resolved against the servlet path and path info as Tomcat
 * resolves it, and {@code getLocales} with every locale of the request, in its order. Spring's
 * {@code MockServletContext} hands out a dispatcher for any path, which records where it forwards:
 * the path the copy asked for (the probe {@code MvcEndedRequestReadsProbeTest} shows an include and
 * a forward on Tomcat).
 */
class EndedRequestDispatcherTest {

  @ParameterizedTest
  @CsvSource({
    "/receipts, /orders, /new, /receipts",
    "receipt, /orders, /new/x, /orders/new/receipt",
    "receipt, /orders, , /receipt",
    "receipt, /a b/ä, /x, /a%20b/%C3%A4/receipt",
    "receipt#top, /orders/x, , /orders/receipt",
    "../receipt, /orders/new/x, , /orders/new/../receipt"
  })
  void answersTheServletContextsDispatcherForThePath(
      String path, String servletPath, String pathInfo, String expected) throws Exception {
    MockHttpServletRequest request =
        new MockHttpServletRequest(new MockServletContext(), "POST", "/");
    request.setServletPath(servletPath);
    request.setPathInfo(pathInfo);

    HttpServletRequest ended = EndedRequest.copyOf(request).proxy();
    RequestDispatcher dispatcher = ended.getRequestDispatcher(path);

    assertThat(dispatcher).isNotNull();
    MockHttpServletResponse response = new MockHttpServletResponse();
    dispatcher.forward(ended, response);
    assertThat(response.getForwardedUrl()).isEqualTo(expected);
  }

  @Test
  void answersNoDispatcherForNoPath() {
    MockHttpServletRequest request =
        new MockHttpServletRequest(new MockServletContext(), "POST", "/");

    assertThat(EndedRequest.copyOf(request).proxy().getRequestDispatcher(null)).isNull();
  }

  @Test
  void answersEveryLocaleInTheRequestsOrder() {
    MockHttpServletRequest request =
        new MockHttpServletRequest(new MockServletContext(), "POST", "/");
    request.setPreferredLocales(List.of(Locale.ENGLISH, Locale.FRENCH));

    HttpServletRequest ended = EndedRequest.copyOf(request).proxy();

    assertThat(Collections.list(ended.getLocales()))
        .isEqualTo(List.of(Locale.ENGLISH, Locale.FRENCH));
    assertThat(ended.getLocale()).isEqualTo(Locale.ENGLISH);
  }
}
