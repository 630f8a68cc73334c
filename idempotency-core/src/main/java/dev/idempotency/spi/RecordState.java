package dev.idempotency.spi;

/** The state of a stored idempotency record. */
public enum RecordState {
  /** A caller holds the claim and is (or was, if it crashed) sending. */
  IN_PROGRESS,
  /** The send happened and its outcome is stored; repeats replay it. */
  COMPLETED,
  /** The send failed permanently; repeats get the stored failure without a send. */
  FAILED
}
