/** Runnable examples of the idempotency SDK. Not published. */
package dev.idempotency.examples;
