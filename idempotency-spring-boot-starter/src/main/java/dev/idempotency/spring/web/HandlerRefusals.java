package dev.idempotency.spring.web;

import org.springframework.web.method.annotation.HandlerMethodValidationException;
import org.springframework.web.server.ServerWebInputException;
import org.springframework.web.server.UnsupportedMediaTypeStatusException;

/**
 * Errors by which Spring WebFlux refuses a request before the handler method runs: its body could
 * not be decoded or bound, a parameter is missing or invalid, its arguments failed validation, its
 * content type is not accepted. On Spring MVC the guard learns that the handler started; WebFlux
 * offers no such hook, so these errors stand for "the handler did not run", and such a response is
 * not stored (the client may fix its request and send it again under the same key). A handler that
 * throws one of them itself is treated the same.
 */
final class HandlerRefusals {

  private HandlerRefusals() {}

  static boolean isRefusal(Throwable error) {
    return error instanceof ServerWebInputException
        || error instanceof UnsupportedMediaTypeStatusException
        || error instanceof HandlerMethodValidationException;
  }
}
