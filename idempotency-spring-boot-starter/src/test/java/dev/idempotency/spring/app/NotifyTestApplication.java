package dev.idempotency.spring.app;

import dev.idempotency.IdempotencyEvent;
import dev.idempotency.IdempotencyListener;
import jakarta.servlet.DispatcherType;
import jakarta.servlet.Filter;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletRequestWrapper;
import java.security.Principal;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.context.annotation.Bean;
import org.springframework.core.Ordered;

/** A small notify service for the starter's tests: an endpoint, a mailer, a listener. */
@SpringBootApplication
public class NotifyTestApplication {

  /** Every event of the guard, in order. */
  public static final class RecordedEvents implements IdempotencyListener {
    public final List<IdempotencyEvent> events = new CopyOnWriteArrayList<>();

    @Override
    public void onEvent(IdempotencyEvent event) {
      events.add(event);
    }
  }

  @Bean
  RecordedEvents recordedEvents() {
    return new RecordedEvents();
  }

  /** The names of the observations that stopped: Boot wires observation handler beans. */
  public static final class RecordedObservations
      implements io.micrometer.observation.ObservationHandler<
          io.micrometer.observation.Observation.Context> {
    public final List<String> names = new CopyOnWriteArrayList<>();

    @Override
    public boolean supportsContext(io.micrometer.observation.Observation.Context context) {
      return true;
    }

    @Override
    public void onStop(io.micrometer.observation.Observation.Context context) {
      names.add(context.getName());
    }
  }

  @Bean
  RecordedObservations recordedObservations() {
    return new RecordedObservations();
  }

  /** Stands in for authentication: the X-User header becomes the request's principal. */
  @Bean
  FilterRegistrationBean<Filter> fakeAuthentication() {
    FilterRegistrationBean<Filter> registration =
        new FilterRegistrationBean<>(
            (request, response, chain) -> {
              String user = ((HttpServletRequest) request).getHeader("X-User");
              chain.doFilter(
                  user == null
                      ? request
                      : new HttpServletRequestWrapper((HttpServletRequest) request) {
                        @Override
                        public Principal getUserPrincipal() {
                          return () -> user;
                        }
                      },
                  response);
            });
    registration.setOrder(Ordered.HIGHEST_PRECEDENCE);
    return registration;
  }

  /**
   * Holds the first dispatch of a request to {@code /streams/held/{id}} once its async processing
   * started (the handler returned its emitter), until the test lets it go ({@link
   * StreamingController#releaseDispatch}): the container's thread is still in the request then.
   */
  @Bean
  FilterRegistrationBean<Filter> heldDispatches(StreamingController streams) {
    FilterRegistrationBean<Filter> registration =
        new FilterRegistrationBean<>(
            (request, response, chain) -> {
              chain.doFilter(request, response);
              if (request.getDispatcherType() == DispatcherType.REQUEST
                  && request.isAsyncStarted()) {
                String uri = ((HttpServletRequest) request).getRequestURI();
                try {
                  streams.awaitDispatchRelease(uri.substring(uri.lastIndexOf('/') + 1));
                } catch (InterruptedException e) {
                  Thread.currentThread().interrupt();
                }
              }
            });
    registration.addUrlPatterns("/streams/held/*");
    registration.setOrder(Ordered.HIGHEST_PRECEDENCE + 1);
    return registration;
  }
}
