package dev.idempotency.spring;

import static org.assertj.core.api.Assertions.assertThat;

import java.math.BigDecimal;
import java.time.LocalDate;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** Which key expression values are stable keys: everything but {@code Object.toString()}. */
class KeyValuesTest {

  record OrderShipped(String orderId) {}

  static class Named {
    @Override
    public String toString() {
      return "named-1";
    }
  }

  static class Opaque {}

  static class OpaqueSubclassOfNamed extends Named {}

  @Test
  void stringsNumbersUuidsEnumsRecordsAndOwnToStringsAreStable() {
    for (Object value :
        List.of(
            "order-1",
            42,
            42L,
            new BigDecimal("1.50"),
            UUID.randomUUID(),
            TimeUnit.SECONDS,
            LocalDate.of(2026, 1, 2),
            new OrderShipped("o-1"),
            new Named(),
            new OpaqueSubclassOfNamed(),
            List.of("a", 1, new OrderShipped("o-2")),
            Map.of("tenant", "t-1"))) {
      assertThat(KeyValues.instability(value)).as(value.getClass().getName()).isNull();
    }
  }

  @Test
  void anObjectWithoutItsOwnToStringIsRefusedSayingSo() {
    assertThat(KeyValues.instability(new Opaque()))
        .contains(Opaque.class.getName())
        .contains("does not override toString()")
        .contains("Object.toString");
    assertThat(KeyValues.instability(new Object())).contains("Object.toString");
  }

  @Test
  void arraysAndCollectionsHoldingOpaqueObjectsAreRefused() {
    assertThat(KeyValues.instability(new String[] {"a"})).contains("an array");
    assertThat(KeyValues.instability(List.of("a", new Opaque())))
        .startsWith("a collection holding a " + Opaque.class.getName());
    assertThat(KeyValues.instability(Map.of("k", new Opaque()))).startsWith("a map holding");
  }
}
