package dev.idempotency.dynamodb;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.testservers.Dynalite;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;

/**
 * The test server survives a client that goes away mid-request, as a client whose attempt timed
 * out, or a killed process, does. dynalite 4.0.0 itself throws the aborted request's error and
 * exits, which ended the shared server under load (every later test: "Connection refused").
 */
class DynaliteAbortedRequestTest {

  @Test
  void aRequestAbortedMidBodyDoesNotEndTheServer() throws Exception {
    try (Dynalite dynalite = new Dynalite();
        DynamoDbClient client = DynaliteClients.client(dynalite.endpoint())) {
      for (int i = 0; i < 3; i++) {
        try (Socket socket = new Socket("127.0.0.1", dynalite.port())) {
          OutputStream out = socket.getOutputStream();
          out.write(
              ("POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-amz-json-1.0\r\n"
                      + "X-Amz-Target: DynamoDB_20120810.ListTables\r\nContent-Length: 1000\r\n\r\n"
                      + "{\"Limit\":")
                  .getBytes(StandardCharsets.US_ASCII));
          out.flush();
        } // closed with 990 bytes of the body unsent
        for (int request = 0; request < 5; request++) {
          assertThat(client.listTables().tableNames()).isNotNull();
        }
      }
      assertThat(dynalite.isAlive()).isTrue();
    }
  }
}
