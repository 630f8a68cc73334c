package dev.idempotency.dynamodb;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Optional;
import java.util.zip.CRC32;
import software.amazon.awssdk.http.AbortableInputStream;
import software.amazon.awssdk.http.HttpExecuteResponse;
import software.amazon.awssdk.protocols.jsoncore.JsonNode;
import software.amazon.awssdk.protocols.jsoncore.JsonNodeParser;
import software.amazon.awssdk.protocols.jsoncore.JsonWriter;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;
import software.amazon.awssdk.services.dynamodb.model.AttributeValue;

/**
 * What dynalite leaves out and DynamoDB does: a write refused by its condition, sent with {@code
 * ReturnValuesOnConditionCheckFailure=ALL_OLD}, gets the item that failed the condition in its
 * {@code ConditionalCheckFailedException} (the error's {@code Item} member). This rewrites
 * dynalite's error to carry it: the item, read just after the refusal through a client of its own
 * (so not counted), in DynamoDB's JSON, with the response's CRC32 recomputed (the SDK checks it).
 */
final class ConditionFailureItems {

  private static final JsonNodeParser PARSER = JsonNodeParser.create();

  private final DynamoDbClient reader;
  private final String partitionKey;

  ConditionFailureItems(DynamoDbClient reader, String partitionKey) {
    this.reader = reader;
    this.partitionKey = partitionKey;
  }

  /**
   * The response as DynamoDB would give it: unchanged unless it is a condition failure of a request
   * that asked for the old item, and the item exists.
   */
  HttpExecuteResponse answer(byte[] requestBody, HttpExecuteResponse response, byte[] body) {
    String text = new String(body, StandardCharsets.UTF_8);
    JsonNode request = PARSER.parse(requestBody);
    boolean asked =
        request
            .field("ReturnValuesOnConditionCheckFailure")
            .map(JsonNode::asString)
            .filter("ALL_OLD"::equals)
            .isPresent();
    if (response.httpResponse().statusCode() != 400
        || !text.contains("ConditionalCheckFailedException")
        || !asked) {
      return rebuilt(response, body);
    }
    String keyValue = partitionKeyValue(request, partitionKey);
    Map<String, AttributeValue> item =
        reader
            .getItem(
                get ->
                    get.tableName(request.field("TableName").orElseThrow().text())
                        .key(Map.of(partitionKey, AttributeValue.fromS(keyValue)))
                        .consistentRead(true))
            .item();
    if (item == null || item.isEmpty()) {
      return rebuilt(response, body); // no item failed the condition: DynamoDB returns none either
    }
    JsonNode error = PARSER.parse(body);
    JsonWriter json = JsonWriter.create();
    json.writeStartObject();
    for (String field : new String[] {"__type", "message", "Message"}) {
      Optional<JsonNode> value = error.field(field);
      if (value.isPresent()) {
        json.writeFieldName(field).writeValue(value.get().text());
      }
    }
    json.writeFieldName("Item").writeStartObject();
    item.forEach((name, value) -> write(json.writeFieldName(name), value));
    json.writeEndObject().writeEndObject();
    return rebuilt(response, json.getBytes());
  }

  /** The partition key's value in a request's {@code Key} (or a put's {@code Item}). */
  static String partitionKeyValue(JsonNode request, String partitionKey) {
    JsonNode keyHolder = request.field("Key").or(() -> request.field("Item")).orElseThrow();
    return keyHolder.field(partitionKey).orElseThrow().field("S").orElseThrow().text();
  }

  /** The attribute types the store writes: strings, numbers and binary. */
  private static void write(JsonWriter json, AttributeValue value) {
    json.writeStartObject();
    switch (value.type()) {
      case S -> json.writeFieldName("S").writeValue(value.s());
      case N -> json.writeFieldName("N").writeValue(value.n());
      case B -> json.writeFieldName("B").writeValue(ByteBuffer.wrap(value.b().asByteArray()));
      default -> throw new IllegalArgumentException("not written by the store: " + value.type());
    }
    json.writeEndObject();
  }

  /** A response with this body, its length and CRC32 headers set to match it. */
  static HttpExecuteResponse rebuilt(HttpExecuteResponse response, byte[] body) {
    CRC32 crc = new CRC32();
    crc.update(body);
    return HttpExecuteResponse.builder()
        .response(
            response.httpResponse().toBuilder()
                .removeHeader("Content-Length")
                .putHeader("Content-Length", Integer.toString(body.length))
                .removeHeader("x-amz-crc32")
                .putHeader("x-amz-crc32", Long.toString(crc.getValue()))
                .build())
        .responseBody(AbortableInputStream.create(new java.io.ByteArrayInputStream(body)))
        .build();
  }
}
