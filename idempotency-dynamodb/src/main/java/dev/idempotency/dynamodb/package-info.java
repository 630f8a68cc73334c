/**
 * A key store in Amazon DynamoDB, through the AWS SDK for Java 2.x: {@link
 * dev.idempotency.dynamodb.DynamoDbKeyStore}. One item per key; a claim is one conditional {@code
 * PutItem}, every later write one conditional request fenced by the claim's owner token.
 */
@NullMarked
package dev.idempotency.dynamodb;

import org.jspecify.annotations.NullMarked;
