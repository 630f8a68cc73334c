package dev.idempotency.spring.messaging;

import java.lang.annotation.Annotation;
import java.lang.reflect.Array;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.jspecify.annotations.Nullable;

/**
 * The per-message header arguments of a batch {@link IdempotentListener} beside its list, cut down
 * to the messages it is handed ({@link BatchListenerRun}). Spring Kafka gives each header of a
 * batch as a list with an entry per message of the list it made
 * ({@code @Header(KafkaHeaders.RECEIVED_KEY) List<String>}, offsets, partitions, {@code
 * KafkaHeaders.BATCH_CONVERTED_HEADERS}), and so are the lists of its {@code @Headers} map. Once a
 * message sent before is skipped, entry {@code i} of such a list is no longer message {@code i}'s:
 * each list of the batch's length is filtered by the same indexes as the list, so that it is. A
 * {@code @Header} parameter of an array type ({@code String[]}, {@code long[]}) gets the list
 * converted into an array by Spring's conversion service before the starter sees it, one entry per
 * message all the same: an array of the batch's length is cut the same way. A list or an array of
 * another length was never one entry per message, and is passed as it is. A {@code @Headers} map is
 * handed out without conversion, so its per-message headers are lists there, never arrays; its
 * other values (an array among them) are passed as they are. Other types Spring converts such a
 * list into (a {@code Set}, a joined {@code String}) cannot be cut by index and are passed as they
 * are (documented: take the header as a {@code List} or an array).
 */
final class BatchHeaderArguments {

  private static final String MESSAGE_HEADERS = "org.springframework.messaging.MessageHeaders";

  private BatchHeaderArguments() {}

  /**
   * Replaces, in {@code arguments}, each header argument of the method that holds per-message lists
   * (or an array converted from one) with their entries at {@code kept} (indexes in the list the
   * container made).
   *
   * @param size the length of the list the container made
   * @return the arguments as they were, to put back once the listener ran
   */
  static Object[] align(ListenerMethod method, Object[] arguments, int size, List<Integer> kept) {
    Object[] originals = arguments.clone();
    Object[] aligned = arguments.clone();
    Annotation[][] annotations = method.method.getParameterAnnotations();
    for (int p = 0; p < arguments.length && p < annotations.length; p++) {
      Object value = arguments[p];
      if (p == method.batchIndex || value == null) {
        continue;
      }
      String kind = headerKind(annotations[p]);
      if (kind.equals("Header") && value instanceof List<?> list) {
        aligned[p] = filtered(list, size, kept);
      } else if (kind.equals("Header") && value.getClass().isArray()) {
        aligned[p] = filteredArray(value, size, kept);
      } else if ((kind.equals("Headers") || isMessageHeaders(value))
          && value instanceof Map<?, ?> map) {
        aligned[p] = filtered(map, size, kept);
      }
    }
    System.arraycopy(aligned, 0, arguments, 0, arguments.length);
    return originals;
  }

  /** Puts back the arguments {@link #align} replaced. */
  static void restore(Object[] arguments, Object[] originals, int batchIndex) {
    for (int p = 0; p < arguments.length; p++) {
      if (p != batchIndex) {
        arguments[p] = originals[p];
      }
    }
  }

  /**
   * The list's entries at {@code kept}, or the list as it is where its length is not the batch's:
   * such a list was never one entry per message (Spring Kafka's conversion failures, empty where
   * none failed), so entry {@code i} was not message {@code i}'s before the starter either.
   */
  private static List<?> filtered(List<?> list, int size, List<Integer> kept) {
    if (list.size() != size) {
      return list;
    }
    List<Object> result = new ArrayList<>(kept.size());
    for (int index : kept) {
      result.add(list.get(index));
    }
    return result;
  }

  /**
   * The array's entries at {@code kept}, in an array of the same component type (primitive or not),
   * or the array as it is where its length is not the batch's.
   */
  private static Object filteredArray(Object array, int size, List<Integer> kept) {
    if (Array.getLength(array) != size) {
      return array;
    }
    Object result = Array.newInstance(array.getClass().getComponentType(), kept.size());
    for (int i = 0; i < kept.size(); i++) {
      Array.set(result, i, Array.get(array, kept.get(i)));
    }
    return result;
  }

  private static Map<String, Object> filtered(Map<?, ?> headers, int size, List<Integer> kept) {
    Map<String, Object> result = new LinkedHashMap<>();
    for (Map.Entry<?, ?> header : headers.entrySet()) {
      Object value = header.getValue();
      result.put(
          String.valueOf(header.getKey()),
          value instanceof List<?> list ? filtered(list, size, kept) : value);
    }
    return isMessageHeaders(headers) ? SpringMessageHeaders.of(headers, result) : result;
  }

  /** "Header", "Headers" or "" by the parameter's annotations (by simple name, as elsewhere). */
  private static String headerKind(Annotation[] annotations) {
    for (Annotation annotation : annotations) {
      String simpleName = annotation.annotationType().getSimpleName();
      if (simpleName.equals("Header") || simpleName.equals("Headers")) {
        return simpleName;
      }
    }
    return "";
  }

  private static boolean isMessageHeaders(@Nullable Object value) {
    for (Class<?> each = value != null ? value.getClass() : null;
        each != null;
        each = each.getSuperclass()) {
      if (each.getName().equals(MESSAGE_HEADERS)) {
        return true;
      }
    }
    return false;
  }

  /** Loaded only where a {@code MessageHeaders} was handed out, so Spring Messaging is present. */
  private static final class SpringMessageHeaders {
    static Map<String, Object> of(Map<?, ?> original, Map<String, Object> headers) {
      org.springframework.messaging.MessageHeaders from =
          (org.springframework.messaging.MessageHeaders) original;
      UUID id = from.getId();
      Long timestamp = from.getTimestamp();
      // the protected constructor keeps the container's id and timestamp
      return new org.springframework.messaging.MessageHeaders(headers, id, timestamp) {};
    }
  }
}
