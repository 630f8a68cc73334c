/**
 * The in-memory store, on Caffeine: bounded, for one JVM. The default for tests and for
 * single-instance services; use the JDBC or Redis store when several instances share keys.
 */
package dev.idempotency.inmemory;
