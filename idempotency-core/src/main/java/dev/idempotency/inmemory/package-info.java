/**
 * The in-memory store, on Caffeine: bounded, for one JVM. The default for tests and for
 * single-instance services; use the JDBC or Redis store when several instances share keys.
 */
@NullMarked
package dev.idempotency.inmemory;

import org.jspecify.annotations.NullMarked;
