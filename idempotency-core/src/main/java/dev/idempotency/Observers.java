package dev.idempotency;

import java.util.ArrayList;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** The guard's observers as one, each isolated: one that throws is logged and ignored. */
final class Observers implements IdempotencyObserver {

  private static final Logger log = LoggerFactory.getLogger(Observers.class);

  private final List<IdempotencyObserver> observers;

  Observers(List<IdempotencyObserver> observers) {
    this.observers = List.copyOf(observers);
  }

  boolean isEmpty() {
    return observers.isEmpty();
  }

  @Override
  public void onEvent(IdempotencyEvent event) {
    for (IdempotencyObserver observer : observers) {
      try {
        observer.onEvent(event);
      } catch (RuntimeException e) {
        log.warn("An IdempotencyObserver threw on a {} event; ignored", event.type(), e);
      }
    }
  }

  @Override
  public CallObservation onCallStart(String operation, String store) {
    if (observers.isEmpty()) {
      return CallObservation.NONE;
    }
    List<CallObservation> calls = new ArrayList<>(observers.size());
    for (IdempotencyObserver observer : observers) {
      try {
        calls.add(observer.onCallStart(operation, store));
      } catch (RuntimeException e) {
        log.warn("An IdempotencyObserver threw when a call started; ignored", e);
      }
    }
    return calls.size() == 1 ? isolated(calls.get(0)) : new Calls(calls);
  }

  @Override
  public void onStoreOperation(String store, String operation, long nanos, Throwable failure) {
    for (IdempotencyObserver observer : observers) {
      try {
        observer.onStoreOperation(store, operation, nanos, failure);
      } catch (RuntimeException e) {
        log.warn("An IdempotencyObserver threw on a store operation; ignored", e);
      }
    }
  }

  private static CallObservation isolated(CallObservation call) {
    return call == CallObservation.NONE ? call : new Calls(List.of(call));
  }

  /** Several call observations as one, each isolated. */
  private static final class Calls implements CallObservation {
    private final List<CallObservation> calls;

    Calls(List<CallObservation> calls) {
      this.calls = calls;
    }

    @Override
    public void onEvent(IdempotencyEvent event) {
      for (CallObservation call : calls) {
        try {
          call.onEvent(event);
        } catch (RuntimeException e) {
          log.warn("An IdempotencyObserver threw on a call's event; ignored", e);
        }
      }
    }

    @Override
    public Scope openScope() {
      List<Scope> scopes = new ArrayList<>(calls.size());
      for (CallObservation call : calls) {
        try {
          scopes.add(call.openScope());
        } catch (RuntimeException e) {
          log.warn("An IdempotencyObserver threw opening a scope; ignored", e);
        }
      }
      return () -> {
        for (int i = scopes.size() - 1; i >= 0; i--) {
          try {
            scopes.get(i).close();
          } catch (RuntimeException e) {
            log.warn("An IdempotencyObserver threw closing a scope; ignored", e);
          }
        }
      };
    }

    @Override
    public void onEnd(Throwable failure) {
      for (CallObservation call : calls) {
        try {
          call.onEnd(failure);
        } catch (RuntimeException e) {
          log.warn("An IdempotencyObserver threw when a call ended; ignored", e);
        }
      }
    }
  }
}
