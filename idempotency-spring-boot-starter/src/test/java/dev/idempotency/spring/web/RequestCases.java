package dev.idempotency.spring.web;

import static dev.idempotency.spring.web.EndpointClient.header;
import static dev.idempotency.spring.web.EndpointClient.newKey;
import static dev.idempotency.spring.web.EndpointClient.text;
import static org.assertj.core.api.Assertions.assertThat;

import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Request bodies and keys: multipart and form bodies work and are fingerprinted, JSON numbers are
 * compared exactly, and keys too short or too long once scoped are a 400, never a 500. Run on every
 * store by {@link EndpointContract}.
 */
interface RequestCases extends EndpointClient {

  String BOUNDARY = "----idempotency-test-boundary";

  static HttpRequest.BodyPublisher multipart(String fileContent, String caption) {
    return multipart(BOUNDARY, fileContent, caption);
  }

  static HttpRequest.BodyPublisher multipart(String boundary, String fileContent, String caption) {
    String body =
        "--"
            + boundary
            + "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"list.csv\"\r\n"
            + "Content-Type: text/csv\r\n\r\n"
            + fileContent
            + "\r\n--"
            + boundary
            + "\r\nContent-Disposition: form-data; name=\"caption\"\r\n\r\n"
            + caption
            + "\r\n--"
            + boundary
            + "--\r\n";
    return HttpRequest.BodyPublishers.ofString(body, StandardCharsets.UTF_8);
  }

  default HttpResponse<byte[]> upload(String key, String fileContent, String caption)
      throws Exception {
    return send(
        "POST",
        "/uploads",
        key,
        "multipart/form-data; boundary=" + BOUNDARY,
        multipart(fileContent, caption));
  }

  default HttpResponse<byte[]> form(String key, String form) throws Exception {
    return send(
        "POST",
        "/forms",
        key,
        "application/x-www-form-urlencoded",
        HttpRequest.BodyPublishers.ofString(form));
  }

  @Test
  default void aMultipartUploadReachesTheHandlerAndIsReplayed() throws Exception {
    String key = newKey();

    HttpResponse<byte[]> first = upload(key, "+15550100042,+15550100043", "march list");
    HttpResponse<byte[]> repeat = upload(key, "+15550100042,+15550100043", "march list");

    assertThat(first.statusCode()).as(text(first)).isEqualTo(200);
    assertThat(text(first))
        .contains("\"content\":\"+15550100042,+15550100043\"")
        .contains("\"caption\":\"march list\"")
        .contains("\"file\":\"list.csv\"");
    assertThat(repeat.body()).isEqualTo(first.body());
    assertThat(header(repeat, "Idempotent-Replayed")).isEqualTo("true");
    assertThat(runs()).isEqualTo(1);
  }

  @Test
  default void aRetryOfAnUploadWithAnotherBoundaryIsTheSameRequest() throws Exception {
    String key = newKey();

    HttpResponse<byte[]> first = upload(key, "+15550100042", "june list");
    HttpResponse<byte[]> retry =
        send(
            "POST",
            "/uploads",
            key,
            "multipart/form-data; boundary=another-boundary-of-the-retry",
            multipart("another-boundary-of-the-retry", "+15550100042", "june list"));

    assertThat(first.statusCode()).as(text(first)).isEqualTo(200);
    assertThat(retry.statusCode())
        .as("clients pick a new boundary per request: the parts are the request")
        .isEqualTo(200);
    assertThat(retry.body()).isEqualTo(first.body());
    assertThat(header(retry, "Idempotent-Replayed")).isEqualTo("true");
    assertThat(runs()).isEqualTo(1);
  }

  @Test
  default void anotherFileOrFieldUnderTheSameKeyIs422() throws Exception {
    String key = newKey();
    upload(key, "+15550100042", "april list");

    HttpResponse<byte[]> otherFile = upload(key, "+15550100099", "april list");
    HttpResponse<byte[]> otherCaption = upload(key, "+15550100042", "may list");

    assertThat(otherFile.statusCode()).isEqualTo(422);
    assertThat(otherCaption.statusCode()).isEqualTo(422);
    assertThat(runs()).isEqualTo(1);
  }

  @Test
  default void aFormPostKeepsItsParametersAndIsFingerprintedByThem() throws Exception {
    String key = newKey();

    HttpResponse<byte[]> first = form(key, "recipient=%2B15550100042&text=hello");
    HttpResponse<byte[]> reordered = form(key, "text=hello&recipient=%2B15550100042");
    HttpResponse<byte[]> other = form(key, "recipient=%2B15550100042&text=goodbye");

    assertThat(first.statusCode()).as(text(first)).isEqualTo(200);
    assertThat(text(first))
        .contains("\"recipient\":\"+15550100042\"")
        .contains("\"text\":\"hello\"");
    assertThat(reordered.body()).isEqualTo(first.body());
    assertThat(header(reordered, "Idempotent-Replayed")).isEqualTo("true");
    assertThat(other.statusCode()).isEqualTo(422);
    assertThat(runs()).isEqualTo(1);
  }

  @Test
  default void numbersThatDifferInAnyDigitAreDifferentRequests() throws Exception {
    String key = newKey();

    HttpResponse<byte[]> first =
        post("/notify", key, "{\"channel\":\"sms\",\"user_id\":1234567890123456789}");
    HttpResponse<byte[]> otherUser =
        post("/notify", key, "{\"channel\":\"sms\",\"user_id\":1234567890123456788}");
    HttpResponse<byte[]> otherAmount =
        post("/notify", key, "{\"channel\":\"sms\",\"user_id\":1234567890123456789.000001}");

    assertThat(first.statusCode()).isEqualTo(201);
    assertThat(otherUser.statusCode())
        .as("two 64-bit ids one apart are two requests, not one rounded double")
        .isEqualTo(422);
    assertThat(otherAmount.statusCode()).isEqualTo(422);
    assertThat(runs()).isEqualTo(1);
  }

  @Test
  default void equalNumbersInAnySpellingAreTheSameRequest() throws Exception {
    String key = newKey();

    HttpResponse<byte[]> first = post("/notify", key, "{\"channel\":\"sms\",\"parts\":1}");
    HttpResponse<byte[]> decimal = post("/notify", key, "{\"channel\":\"sms\",\"parts\":1.0}");
    HttpResponse<byte[]> exponent = post("/notify", key, "{\"parts\":1e0,\"channel\":\"sms\"}");
    HttpResponse<byte[]> big =
        post("/notify", key, "{\"channel\":\"sms\",\"parts\":10000000000000000000E-19}");

    assertThat(first.statusCode()).isEqualTo(201);
    assertThat(decimal.statusCode()).isEqualTo(201);
    assertThat(header(decimal, "Idempotent-Replayed")).isEqualTo("true");
    assertThat(header(exponent, "Idempotent-Replayed")).isEqualTo("true");
    assertThat(header(big, "Idempotent-Replayed")).isEqualTo("true");
    assertThat(runs()).isEqualTo(1);
  }

  @Test
  default void aKeyTooLongOnceScopedIsA400ProblemNotA500() throws Exception {
    String key = "k".repeat(1_020); // valid alone (at most 1,024), too long with the scope

    HttpResponse<byte[]> response = post("/notify", key, "{\"channel\":\"sms\"}");

    assertThat(response.statusCode()).isEqualTo(400);
    assertThat(header(response, "Content-Type")).isEqualTo("application/problem+json");
    assertThat(text(response)).contains("/problems/key-too-long").contains("\"max-length\":");
    assertThat(runs()).isZero();
  }

  /**
   * A key of this many characters, new to the store: the MVC and WebFlux applications of one test
   * JVM share their Redis and PostgreSQL servers, and a fixed key sent by one is a replay in the
   * other.
   */
  private static String freshKey(int length) {
    String fresh = java.util.UUID.randomUUID().toString().replace("-", "");
    return fresh + "k".repeat(length - fresh.length());
  }

  @Test
  default void oneLimitAndOneProblemForEveryKeyTooLong() throws Exception {
    HttpResponse<byte[]> longest = post("/notify", freshKey(1_000), "{\"channel\":\"sms\"}");
    String limit = text(post("/notify", "k".repeat(1_020), "{\"channel\":\"sms\"}"));
    String max = limit.replaceAll("(?s).*\"max-length\":(\\d+).*", "$1");
    int maxLength = Integer.parseInt(max);

    assertThat(longest.statusCode()).as("a key within the limit").isEqualTo(201);
    for (int length : new int[] {maxLength + 1, 1_024, 1_025, 4_000}) {
      HttpResponse<byte[]> response = post("/notify", "k".repeat(length), "{\"channel\":\"sms\"}");
      assertThat(response.statusCode()).as("length " + length).isEqualTo(400);
      assertThat(text(response))
          .as("length " + length)
          .contains("/problems/key-too-long")
          .contains("\"max-length\":" + maxLength)
          .contains("at most " + maxLength + " characters");
    }
    assertThat(runs()).isEqualTo(1);
  }

  @Test
  default void moreThanOneKeyFieldIsA400WhetherTwoLinesOrAList() throws Exception {
    String first = newKey();
    String second = newKey();

    HttpResponse<byte[]> twoLines =
        post("/notify", first, "{\"channel\":\"sms\"}", "Idempotency-Key", second);
    HttpResponse<byte[]> list = post("/notify", first + ", " + second, "{\"channel\":\"sms\"}");
    HttpResponse<byte[]> tokens =
        post("/notify", "k".repeat(20) + ",j" + "j".repeat(20), "{\"channel\":\"sms\"}");

    for (HttpResponse<byte[]> response : List.of(twoLines, list, tokens)) {
      assertThat(response.statusCode()).as(text(response)).isEqualTo(400);
      assertThat(header(response, "Content-Type")).isEqualTo("application/problem+json");
      assertThat(text(response)).contains("/problems/malformed-key").contains("one key");
    }
    assertThat(runs()).as("none of them ran the handler").isZero();
  }

  @Test
  default void aKeyShorterThanTheMinimumIsA400() throws Exception {
    HttpResponse<byte[]> oneCharacter = post("/notify", "a", "{\"channel\":\"sms\"}");
    HttpResponse<byte[]> fifteen = post("/notify", "\"123456789012345\"", "{\"channel\":\"sms\"}");
    String exactlySixteen = java.util.UUID.randomUUID().toString().replace("-", "").substring(16);
    HttpResponse<byte[]> sixteen = post("/notify", exactlySixteen, "{\"channel\":\"sms\"}");

    assertThat(oneCharacter.statusCode()).isEqualTo(400);
    assertThat(text(oneCharacter)).contains("/problems/key-too-short").contains("16");
    assertThat(fifteen.statusCode()).isEqualTo(400);
    assertThat(sixteen.statusCode())
        .as("the default minimum, idempotency.http.min-key-length, is 16")
        .isEqualTo(201);
    assertThat(runs()).isEqualTo(1);
  }
}
