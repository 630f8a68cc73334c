package dev.idempotency.spring.web;

import jakarta.servlet.DispatcherType;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletRequestEvent;
import jakarta.servlet.ServletRequestListener;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import org.jspecify.annotations.Nullable;
import org.springframework.web.filter.OncePerRequestFilter;
import org.springframework.web.util.WebUtils;

/**
 * Follows an {@link IdempotentEndpoint} request to the response its client gets, as Spring's {@code
 * ShallowEtagHeaderFilter} follows a request through its async dispatches, and through the error
 * dispatch too:
 *
 * <ol>
 *   <li>on the request dispatch it wraps the request (its body can then be read twice) and the
 *       response (its body can then be held back, or, for a stream such as server-sent events,
 *       copied on its way to the client); both pass everything through until the {@link
 *       IdempotentEndpointInterceptor} claims a key;
 *   <li>when a dispatch ends with the request's async processing started, it waits for the async
 *       dispatch; when the application called {@code sendError}, for the error dispatch, in which
 *       it captures the error page;
 *   <li>when the response is final, it has it stored (or the key released) and sends it on;
 *   <li>an exception out of the chain releases the key (unless part of the response went out and
 *       the client went away: then it is recorded as answered without its body); when the container
 *       destroys a request ({@link ServletRequestListener}) that ended otherwise without a final
 *       response, it releases the key, or, if the handler called sendError and the container wrote
 *       its own error page (no error dispatch), stores the status without a body.
 * </ol>
 *
 * <p>It runs late in the filter chain (after authentication and the like), so that a response the
 * handler did not make (a 401 of a security filter) is never stored. The Spring Boot
 * auto-configuration registers it as a filter for the request, async and error dispatches, and as a
 * request listener. Thread-safe.
 */
public final class IdempotentEndpointFilter extends OncePerRequestFilter
    implements ServletRequestListener {

  /** The header that marks a replayed response. */
  public static final String REPLAYED_HEADER = IdempotentEndpointInterceptor.REPLAYED_HEADER;

  /**
   * The request attribute that holds the call's {@link dev.idempotency.SendContext} while the
   * handler runs: its provider key is what to pass to the provider. A handler method can also
   * declare a {@code SendContext} parameter.
   */
  public static final String SEND_CONTEXT_ATTRIBUTE = "dev.idempotency.SendContext";

  /** Set while the container tells the listener about the request, so it will end it too. */
  private static final String LISTENED = IdempotentEndpointFilter.class.getName() + ".LISTENED";

  private final long maxResponseBytes;

  /**
   * Creates the filter.
   *
   * @param maxResponseBytes the most response body bytes held back to store (of a stream, which is
   *     never held back, the most bytes copied); a larger body goes to the client as it comes, and
   *     is not stored
   */
  public IdempotentEndpointFilter(long maxResponseBytes) {
    if (maxResponseBytes < 0) {
      throw new IllegalArgumentException("maxResponseBytes must not be negative");
    }
    this.maxResponseBytes = maxResponseBytes;
  }

  @Override
  protected boolean shouldNotFilterAsyncDispatch() {
    return false;
  }

  @Override
  protected boolean shouldNotFilterErrorDispatch() {
    return false;
  }

  @Override
  protected void doFilterInternal(
      HttpServletRequest request, HttpServletResponse response, FilterChain chain)
      throws ServletException, IOException {
    DispatcherType dispatch = request.getDispatcherType();
    if (dispatch == DispatcherType.ERROR) {
      errorDispatch(request, response, chain);
      return;
    }
    HttpServletRequest requestToUse = request;
    HttpServletResponse responseToUse = response;
    if (dispatch == DispatcherType.REQUEST) {
      requestToUse = new BodyCachingRequest(request);
      responseToUse = new CapturingResponse(response, maxResponseBytes);
    }
    // an async dispatch gets the wrappers of the request dispatch, passed to startAsync
    try {
      chain.doFilter(requestToUse, responseToUse);
    } catch (IOException | ServletException | RuntimeException | Error e) {
      failed(request, responseToUse, e);
      throw e;
    }
    EndpointCall call = callOf(request);
    if (call == null || call.reported() || isAsyncStarted(request)) {
      return; // not claimed, answered already, or an async dispatch to come
    }
    CapturingResponse capture = WebUtils.getNativeResponse(responseToUse, CapturingResponse.class);
    if (capture == null) {
      call.release("the response wrapper is gone");
      return;
    }
    if (capture.errorSent() && request.getAttribute(LISTENED) != null) {
      call.awaitErrorPage(capture); // the container renders it in an error dispatch
      return;
    }
    call.finish(capture);
  }

  /** The error page of a request whose handler called sendError: captured, then final. */
  private void errorDispatch(
      HttpServletRequest request, HttpServletResponse response, FilterChain chain)
      throws ServletException, IOException {
    EndpointCall call = callOf(request);
    if (call == null || !call.awaitingErrorPage()) {
      chain.doFilter(request, response);
      return;
    }
    CapturingResponse capture = new CapturingResponse(response, maxResponseBytes);
    capture.startCapture();
    try {
      chain.doFilter(request, capture);
    } catch (IOException | ServletException | RuntimeException | Error e) {
      failed(request, capture, e);
      throw e;
    }
    call.finish(capture);
  }

  private static void failed(
      HttpServletRequest request, HttpServletResponse response, Throwable e) {
    EndpointCall call = callOf(request);
    if (call != null) {
      call.failed(WebUtils.getNativeResponse(response, CapturingResponse.class), e);
    }
  }

  private static @Nullable EndpointCall callOf(ServletRequest request) {
    return request.getAttribute(EndpointCall.ATTRIBUTE) instanceof EndpointCall call ? call : null;
  }

  /** Marks the request: the container will tell {@link #requestDestroyed} when it ends. */
  @Override
  public void requestInitialized(ServletRequestEvent event) {
    event.getServletRequest().setAttribute(LISTENED, Boolean.TRUE);
  }

  /**
   * A claimed request that ended without a final response the filter saw: released, or, if the
   * handler answered with sendError and the container wrote its own error page, stored by status. A
   * request whose handler's work goes on without it (after a timeout) is, for that work, a copy of
   * it from now on ({@link EndpointCall#requestDestroyed}).
   */
  @Override
  public void requestDestroyed(ServletRequestEvent event) {
    EndpointCall call = callOf(event.getServletRequest());
    if (call == null) {
      return;
    }
    if (!call.reported()) {
      try {
        call.requestEnded();
      } catch (IOException e) {
        call.release("the request ended: " + e);
      }
    }
    call.requestDestroyed(); // work that goes on reads a copy of its request from now on
  }
}
