package dev.idempotency.spring.web;

import static dev.idempotency.spring.web.DecoratedRun.NOT_RUN;
import static dev.idempotency.spring.web.DecoratedRun.RUNNING;
import static dev.idempotency.spring.web.DecoratedRun.setMdc;

import dev.idempotency.KeyStoreException;
import jakarta.servlet.http.HttpServletRequest;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.MDC;
import org.springframework.context.i18n.LocaleContext;
import org.springframework.context.i18n.LocaleContextHolder;
import org.springframework.web.context.request.RequestAttributes;
import org.springframework.web.context.request.RequestContextHolder;
import org.springframework.web.context.request.ServletRequestAttributes;

/**
 * What a run of work detached from its request gets on the starter's thread, as Spring MVC's task
 * thread gets it: the MDC and locale the request's thread had when the work was queued, request
 * attributes of its own over that thread's request ({@link #attributesOfTheTakenOverRun}), the
 * request's callable interceptors around the work, and the application's task decorator around the
 * whole; its end goes to {@link AsyncWork#takenOverResult}. For work the starter took over ({@link
 * AsyncWork.Queued#runDetached}) and for the later stages of work that began on Spring MVC's task
 * and that a timeout or a shutdown detached ({@link AsyncWork.Queued#continueDetached}).
 */
record StarterRun(
    EndpointCall call,
    @Nullable Map<String, String> mdc,
    @Nullable LocaleContext locale,
    @Nullable RequestAttributes attributes,
    TaskThreadContext context) {

  /** Under UninterruptedWork's logger, as before this record was split out of it. */
  private static final Logger log = LoggerFactory.getLogger(UninterruptedWork.class);

  /**
   * The run of {@code call}'s work with the thread context this thread has now (the request's): its
   * MDC, locale and request attributes, and {@code context}.
   */
  static StarterRun ofThisThread(EndpointCall call, TaskThreadContext context) {
    return new StarterRun(
        call,
        MDC.getCopyOfContextMap(),
        LocaleContextHolder.getLocaleContext(),
        RequestContextHolder.getRequestAttributes(),
        context);
  }

  /**
   * {@code stages}, run once, decorated by the application's task decorator on this thread.
   *
   * @param run the run's state: it runs only from {@link DecoratedRun#NOT_RUN}
   * @param beginsTheWork whether these are the work's first stage, which waited to begin: it does
   *     not run if its key's lease lapsed meanwhile (a {@code KeyStoreException})
   * @param laterStageRan whether a stage of the work ran before these
   */
  Runnable decorated(
      AtomicInteger run, boolean beginsTheWork, boolean laterStageRan, Stages stages) {
    return context.decorate(
        () -> {
          if (!run.compareAndSet(NOT_RUN, RUNNING)) {
            return; // not taken over (the work ran on Spring MVC's task), or given up
          }
          Map<String, String> previousMdc = MDC.getCopyOfContextMap();
          LocaleContext previousLocale = LocaleContextHolder.getLocaleContext();
          RequestAttributes previousAttributes = RequestContextHolder.getRequestAttributes();
          RequestAttributes own = attributesOfTheTakenOverRun(attributes);
          setMdc(mdc);
          LocaleContextHolder.setLocaleContext(locale);
          RequestContextHolder.setRequestAttributes(own);
          @Nullable Object result;
          boolean[] ran = {laterStageRan};
          try {
            if (beginsTheWork && !call.leaseHeld()) {
              // it waited while its lease lapsed (or could not be renewed): nothing was sent
              throw new KeyStoreException(
                  "the key's lease lapsed while the request's work waited to begin; nothing was"
                      + " sent",
                  null);
            }
            // the request's interceptors around the work and its later stages
            result = context.call(() -> stages.run(ran));
          } catch (Throwable failure) {
            result = failure;
          } finally {
            RequestContextHolder.setRequestAttributes(previousAttributes);
            LocaleContextHolder.setLocaleContext(previousLocale);
            setMdc(previousMdc);
            ownAttributesCompleted(own, attributes);
          }
          call.asyncWork().takenOverResult(result, ran[0]);
        });
  }

  /** Stages of work the starter runs detached from its request. */
  interface Stages {
    /**
     * Runs them to their end: their result.
     *
     * @param laterStageRan set once a later stage runs ({@link LaterStages#runToItsEnd})
     */
    @Nullable Object run(boolean[] laterStageRan) throws Exception;
  }

  /**
   * The async timeout of the request whose work is taken over (at its timeout or a shutdown, the
   * request is async by then), in milliseconds; else {@link
   * UninterruptedWork#DEFAULT_ASYNC_TIMEOUT_MILLIS}.
   */
  long asyncTimeout() {
    try {
      if (attributes instanceof ServletRequestAttributes servlet) {
        HttpServletRequest request = servlet.getRequest();
        if (request.isAsyncStarted()) {
          return request.getAsyncContext().getTimeout();
        }
      }
    } catch (RuntimeException e) {
      log.debug("A taken-over request's async timeout could not be read", e);
    }
    return UninterruptedWork.DEFAULT_ASYNC_TIMEOUT_MILLIS;
  }

  /**
   * The request attributes the taken-over run binds: request attributes of its own over the
   * starter's request that {@code captured} holds (a copy of it once the request ended: {@link
   * BodyCachingRequest#outlivedByItsWork}), as {@code FrameworkServlet}'s binding interceptor gives
   * Spring MVC's own task thread fresh ones over its request. The ones captured on the request's
   * thread were completed when that dispatch ended (every request-scope read through them then
   * throws, after the work may have sent). Over the same request, they read the same request
   * attributes: a {@code @RequestScope} bean the handler created is the same instance.
   */
  private static @Nullable RequestAttributes attributesOfTheTakenOverRun(
      @Nullable RequestAttributes captured) {
    if (captured instanceof ServletRequestAttributes servlet) {
      return new ServletRequestAttributes(servlet.getRequest(), servlet.getResponse());
    }
    return captured;
  }

  /**
   * The taken-over run ended: its own request attributes ({@link #attributesOfTheTakenOverRun}) are
   * completed, which runs the destruction callbacks of the request-scoped beans created during the
   * run. A failing callback is logged at DEBUG: the work's outcome is kept.
   */
  private static void ownAttributesCompleted(
      @Nullable RequestAttributes own, @Nullable RequestAttributes captured) {
    if (own != captured && own instanceof ServletRequestAttributes servlet) {
      try {
        servlet.requestCompleted();
      } catch (RuntimeException e) {
        log.debug("A taken-over run's request-scope destruction callback failed", e);
      }
    }
  }
}
