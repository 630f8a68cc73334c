package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyKey;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The key as stored and the operation name, made with less work per request (issue 39: the scope
 * built once instead of twice, operation names kept per pattern): the same values as {@link
 * IdempotencyKey#of} and the operation's definition give, at every limit. A stored key must still
 * be found by a retry after an upgrade.
 */
class EndpointKeysTest {

  private static EndpointKeys.Checked check(String header, String path, String client) {
    return EndpointKeys.check("Idempotency-Key", List.of(header), true, "POST", path, client, 1);
  }

  @Test
  void theScopedKeyIsIdempotencyKeyOfItsParts() {
    for (String header :
        List.of("abc-123", "a:b", "a/b=c", "\"a\\\\b\"", "\"a:b\\\\:c\"", "\"x y\"", "k")) {
      for (String client : List.of("", "alice", "a:l\\ice")) {
        EndpointKeys.Checked checked = check(header, "/orders/{id}", client);

        String key = dev.idempotency.IdempotencyKeyHeader.parse(header);
        assertThat(checked)
            .as("%s from %s", header, client)
            .isEqualTo(
                new EndpointKeys.Key(
                    IdempotencyKey.of("http", "POST", "/orders/{id}", client, key)));
      }
    }
  }

  @Test
  void theLimitIsStatedInTheClientsCharactersAndEscapesCount() {
    String path = "/p";
    int longest =
        IdempotencyKey.MAX_LENGTH - (IdempotencyKey.of("http", "POST", path, "", "k").length() - 1);

    assertThat(check("a".repeat(longest), path, ""))
        .isEqualTo(
            new EndpointKeys.Key(IdempotencyKey.of("http", "POST", path, "", "a".repeat(longest))));
    assertThat(problem(check("a".repeat(longest + 1), path, "")).type()).endsWith("key-too-long");
    // within the limit in the client's characters, over it once escaped: too long, as before
    assertThat(problem(check(":".repeat(longest), path, "")).type()).endsWith("key-too-long");
    assertThat(problem(check(":".repeat(longest), path, "")).detail())
        .contains("at most " + longest + " characters");
  }

  @Test
  void aScopeThatLeavesNoRoomRefusesEveryKey() {
    String path = "/" + "p".repeat(IdempotencyKey.MAX_LENGTH);

    assertThat(problem(check("abc", path, "")).type()).endsWith("key-too-long");
    assertThat(problem(check("abc", path, "")).detail()).contains("at most 0 characters");
    // a client name that is not valid in a key leaves no room either
    assertThat(problem(check("abc", "/p", "bad\u0001client")).type()).endsWith("key-too-long");
  }

  @Test
  void operationNamesAreTheirDefinitionEveryTime() {
    assertThat(EndpointKeys.operation("POST", "/orders/{id}")).isEqualTo("http.POST_orders__id_");
    assertThat(EndpointKeys.operation("POST", "/orders/{id}")).isEqualTo("http.POST_orders__id_");
    assertThat(EndpointKeys.operation("PUT", "/orders/{id}")).isEqualTo("http.PUT_orders__id_");
    assertThat(EndpointKeys.operation("POST", "/" + "x".repeat(100))).hasSize(64);
    // past the names kept (client-given paths of a mapping without a pattern), still right
    for (int i = 0; i < 3000; i++) {
      assertThat(EndpointKeys.operation("GET", "/path/" + i)).isEqualTo("http.GET_path_" + i);
    }
  }

  private static EndpointProblem problem(EndpointKeys.Checked checked) {
    assertThat(checked).isInstanceOf(EndpointKeys.Refused.class);
    return ((EndpointKeys.Refused) checked).problem();
  }
}
