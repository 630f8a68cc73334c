package dev.idempotency.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.KeyStoreException;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spi.StoredRecord;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class RecordValueTest {

  @Test
  void anInProgressRecordKeepsItsFieldsAndPlacesItsTimesWithTheServersClock() {
    byte[] value = RecordValue.inProgress("owner:1", "fp|with:colons", 30_000, 3_600_000, "ключ:1");

    RecordValue record = RecordValue.parse(value);
    // read 10 s after the claim: 3,590,000 ms of the window remain
    StoredRecord stored = record.inProgress(1_000_000_010_000L, 3_590_000);

    assertThat(record.state()).isEqualTo(RecordState.IN_PROGRESS);
    assertThat(record.ownerToken()).isEqualTo("owner:1");
    assertThat(record.rawKey()).isEqualTo("ключ:1");
    assertThat(stored.attempt()).isEqualTo(1);
    assertThat(stored.fingerprint()).isEqualTo("fp|with:colons");
    assertThat(stored.payload()).isNull();
    assertThat(stored.createdAt()).isEqualTo(Instant.ofEpochMilli(1_000_000_000_000L));
    assertThat(stored.leaseDeadline()).isEqualTo(Instant.ofEpochMilli(1_000_000_030_000L));
    assertThat(stored.retentionDeadline()).isEqualTo(Instant.ofEpochMilli(1_000_003_600_000L));
  }

  /**
   * The claim's record, written straight into one array, is byte for byte the layout the scripts
   * read, here as the former encoder (a stream of length-prefixed fields) wrote it.
   */
  @Test
  void anInProgressRecordIsWrittenInTheLayoutTheScriptsRead() {
    java.util.Random random = new java.util.Random(28);
    String[] texts = {"", "a", "owner:1", "fp|with:colons", "ключ:1", "😀 key", "x".repeat(300)};
    long[] times = {0, 1, 9, 10, 99, 30_000, 3_600_000, 259_200_000, Long.MAX_VALUE};
    for (int i = 0; i < 2_000; i++) {
      String owner = texts[random.nextInt(texts.length)] + random.nextInt(1_000);
      String print = texts[random.nextInt(texts.length)];
      String raw = random.nextInt(4) == 0 ? null : texts[random.nextInt(texts.length)];
      long lease =
          random.nextBoolean() ? times[random.nextInt(times.length)] : random.nextLong() >>> 1;
      long window = times[random.nextInt(times.length)];

      assertThat(RecordValue.inProgress(owner, print, lease, window, raw))
          .as("%s %s %s %s %s", owner, print, lease, window, raw)
          .isEqualTo(streamed(owner, print, lease, window, raw));
    }
  }

  private static byte[] streamed(String owner, String print, long lease, long window, String raw) {
    java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
    out.write('I');
    for (String field :
        new String[] {
          owner,
          "1",
          print,
          raw == null ? "" : raw,
          Long.toString(lease),
          Long.toString(window),
          "",
          "",
          ""
        }) {
      byte[] bytes = field.getBytes(StandardCharsets.UTF_8);
      out.writeBytes(Integer.toString(bytes.length).getBytes(StandardCharsets.US_ASCII));
      out.write(':');
      out.writeBytes(bytes);
    }
    return out.toByteArray();
  }

  @Test
  void aCompletedRecordCarriesAbsoluteTimesAndABinaryPayload() {
    byte[] payload = {0, ':', '\r', '\n', (byte) 0xff};
    byte[] head =
        "C0:1:32:fp0:5:300007:360000013:10000000000003:250".getBytes(StandardCharsets.UTF_8);
    byte[] value = new byte[head.length + 2 + payload.length];
    System.arraycopy(head, 0, value, 0, head.length);
    value[head.length] = '5';
    value[head.length + 1] = ':';
    System.arraycopy(payload, 0, value, head.length + 2, payload.length);

    StoredRecord stored = RecordValue.parse(value).settled();

    assertThat(stored.state()).isEqualTo(RecordState.COMPLETED);
    assertThat(stored.attempt()).isEqualTo(3);
    assertThat(stored.fingerprint()).isEqualTo("fp");
    assertThat(stored.payload()).isEqualTo(payload);
    assertThat(stored.createdAt()).isEqualTo(Instant.ofEpochMilli(1_000_000_000_000L));
    assertThat(stored.completedAt()).isEqualTo(Instant.ofEpochMilli(1_000_000_000_250L));
    assertThat(stored.leaseDeadline()).isEqualTo(Instant.ofEpochMilli(1_000_000_030_000L));
    assertThat(stored.retentionDeadline()).isEqualTo(Instant.ofEpochMilli(1_000_003_600_000L));
  }

  /**
   * Numbers are read off the value's bytes in place; a field that is not plain digits (a sign,
   * leading zeros past 18 digits) still reads as {@link Long#parseLong} reads it, as it always did.
   */
  @Test
  void numbersReadInPlaceReadAsLongParseLongReadsThem() {
    String text =
        "C1:o4:00032:fp0:"
            + "6:+30000"
            + "25:0000000000000000003600000"
            + "13:1000000000000"
            + "3:250"
            + "2:ok";
    StoredRecord stored = RecordValue.parse(text.getBytes(StandardCharsets.UTF_8)).settled();

    assertThat(stored.attempt()).isEqualTo(3);
    assertThat(stored.createdAt()).isEqualTo(Instant.ofEpochMilli(1_000_000_000_000L));
    assertThat(stored.completedAt()).isEqualTo(Instant.ofEpochMilli(1_000_000_000_250L));
    assertThat(stored.leaseDeadline()).isEqualTo(Instant.ofEpochMilli(1_000_000_030_000L));
    assertThat(stored.retentionDeadline()).isEqualTo(Instant.ofEpochMilli(1_000_003_600_000L));
  }

  /** The record's payload is its own copy: the reply's bytes it was read from may be reused. */
  @Test
  void aSettledPayloadIsACopyOfTheValuesBytes() {
    byte[] value =
        "C1:o1:12:fp0:5:300007:360000013:10000000000003:2505:hello"
            .getBytes(StandardCharsets.UTF_8);
    StoredRecord stored = RecordValue.parse(value).settled();

    java.util.Arrays.fill(value, (byte) 'x');

    assertThat(stored.payload()).isEqualTo("hello".getBytes(StandardCharsets.UTF_8));
    assertThat(stored.fingerprint()).isEqualTo("fp");
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "",
        "X0:",
        "I",
        "I1:a",
        "I5:a",
        "Ix:",
        "I0:1:10:0:0:0:0:0:0:",
        "I0:1:10:0:0:0:0:0:0:0:extra",
        "C0:1:10:0:0:1:x0:0:0:0:"
      })
  void aValueThatIsNotARecordIsAKeyStoreExceptionNotAWrongAnswer(String text) {
    byte[] value = text.getBytes(StandardCharsets.UTF_8);

    assertThatThrownBy(() -> RecordValue.parse(value).settled())
        .isInstanceOf(KeyStoreException.class)
        .hasMessageContaining("not one of its records");
  }
}
