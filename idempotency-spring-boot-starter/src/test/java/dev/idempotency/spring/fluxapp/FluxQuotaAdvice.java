package dev.idempotency.spring.fluxapp;

import dev.idempotency.spring.app.QuotaAdvice;
import org.springframework.web.bind.annotation.RestControllerAdvice;

/** The MVC test application's {@link QuotaAdvice}, in the WebFlux test application. */
@RestControllerAdvice
public class FluxQuotaAdvice extends QuotaAdvice {}
