package dev.idempotency.dynamodb;

import java.util.concurrent.atomic.DoubleAdder;
import software.amazon.awssdk.core.SdkRequest;
import software.amazon.awssdk.core.SdkResponse;
import software.amazon.awssdk.core.interceptor.Context;
import software.amazon.awssdk.core.interceptor.ExecutionAttributes;
import software.amazon.awssdk.core.interceptor.ExecutionInterceptor;
import software.amazon.awssdk.services.dynamodb.model.BatchGetItemRequest;
import software.amazon.awssdk.services.dynamodb.model.BatchGetItemResponse;
import software.amazon.awssdk.services.dynamodb.model.DeleteItemRequest;
import software.amazon.awssdk.services.dynamodb.model.DeleteItemResponse;
import software.amazon.awssdk.services.dynamodb.model.GetItemRequest;
import software.amazon.awssdk.services.dynamodb.model.GetItemResponse;
import software.amazon.awssdk.services.dynamodb.model.PutItemRequest;
import software.amazon.awssdk.services.dynamodb.model.PutItemResponse;
import software.amazon.awssdk.services.dynamodb.model.ReturnConsumedCapacity;
import software.amazon.awssdk.services.dynamodb.model.UpdateItemRequest;
import software.amazon.awssdk.services.dynamodb.model.UpdateItemResponse;

/**
 * Asks for {@code ReturnConsumedCapacity=TOTAL} on every item request of the store and adds up what
 * the answers report. A write refused by its condition answers with an error that carries no
 * capacity; DynamoDB charges it as a write of the item's size, which this cannot see.
 */
final class ConsumedCapacity implements ExecutionInterceptor {

  private final DoubleAdder units = new DoubleAdder();

  double units() {
    return units.sum();
  }

  void reset() {
    units.reset();
  }

  @Override
  public SdkRequest modifyRequest(Context.ModifyRequest context, ExecutionAttributes attributes) {
    SdkRequest request = context.request();
    ReturnConsumedCapacity total = ReturnConsumedCapacity.TOTAL;
    if (request instanceof PutItemRequest put) {
      return put.toBuilder().returnConsumedCapacity(total).build();
    }
    if (request instanceof UpdateItemRequest update) {
      return update.toBuilder().returnConsumedCapacity(total).build();
    }
    if (request instanceof DeleteItemRequest delete) {
      return delete.toBuilder().returnConsumedCapacity(total).build();
    }
    if (request instanceof GetItemRequest get) {
      return get.toBuilder().returnConsumedCapacity(total).build();
    }
    if (request instanceof BatchGetItemRequest batch) {
      return batch.toBuilder().returnConsumedCapacity(total).build();
    }
    return request;
  }

  @Override
  public void afterExecution(Context.AfterExecution context, ExecutionAttributes attributes) {
    SdkResponse response = context.response();
    if (response instanceof PutItemResponse put && put.consumedCapacity() != null) {
      units.add(put.consumedCapacity().capacityUnits());
    } else if (response instanceof UpdateItemResponse update && update.consumedCapacity() != null) {
      units.add(update.consumedCapacity().capacityUnits());
    } else if (response instanceof DeleteItemResponse delete && delete.consumedCapacity() != null) {
      units.add(delete.consumedCapacity().capacityUnits());
    } else if (response instanceof GetItemResponse get && get.consumedCapacity() != null) {
      units.add(get.consumedCapacity().capacityUnits());
    } else if (response instanceof BatchGetItemResponse batch && batch.hasConsumedCapacity()) {
      batch.consumedCapacity().forEach(capacity -> units.add(capacity.capacityUnits()));
    }
  }
}
