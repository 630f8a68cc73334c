package dev.idempotency.spring.web;

import jakarta.servlet.http.HttpSession;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicBoolean;
import org.jspecify.annotations.Nullable;

/**
 * The session of an {@link EndedRequest}, as the container would answer it now: the request's own
 * session while it is valid (a session outlives its request until it is invalidated); else none,
 * or, if one is to be created, a fresh detached one that no container knows.
 *
 * <p>Thread-safe.
 */
final class EndedSession {

  private final @Nullable HttpSession copied;
  private @Nullable HttpSession detached; // guarded by this: created by the first getSession()

  /** The session of a request that had {@code copied} ({@code getSession(false)}), or none. */
  EndedSession(@Nullable HttpSession copied) {
    this.copied = copied;
  }

  /**
   * The request's session as the container would answer now: the copied one while it is valid; else
   * none, or, if one is to be created ({@code getSession()}, an {@code HttpSession} parameter of an
   * {@code @ExceptionHandler}), a fresh detached one, kept by this copy only: a late answer creates
   * no session the client could use, yet reads what it reads on time of a new session.
   */
  synchronized @Nullable HttpSession session(boolean create) {
    if (copied != null && valid(copied)) {
      return copied;
    }
    if (!create) {
      return null;
    }
    HttpSession created = detached;
    if (created == null || !valid(created)) {
      created = detachedSession();
      detached = created;
    }
    return created;
  }

  /** Whether {@code session} is still valid: an invalidated one throws, as the Servlet API says. */
  private static boolean valid(HttpSession session) {
    try {
      session.getCreationTime();
      return true;
    } catch (IllegalStateException invalidated) {
      return false;
    }
  }

  /** A new session that no container knows: its attributes live as long as the ended request. */
  private static HttpSession detachedSession() {
    Map<String, Object> attributes = Collections.synchronizedMap(new LinkedHashMap<>());
    String id = UUID.randomUUID().toString();
    long created = System.currentTimeMillis();
    AtomicBoolean invalidated = new AtomicBoolean();
    InvocationHandler answers =
        (proxy, method, args) -> {
          String name = method.getName();
          boolean objectMethod =
              name.equals("equals") || name.equals("hashCode") || name.equals("toString");
          if (invalidated.get() && !objectMethod && !name.equals("getId")) {
            throw new IllegalStateException("the session was invalidated");
          }
          switch (name) {
            case "getId":
              return id;
            case "getCreationTime":
            case "getLastAccessedTime":
              return created;
            case "isNew":
              return true;
            case "getAttribute":
              return attributes.get((String) args[0]);
            case "setAttribute":
              if (args[1] == null) {
                attributes.remove((String) args[0]);
              } else {
                attributes.put((String) args[0], args[1]);
              }
              return null;
            case "removeAttribute":
              attributes.remove((String) args[0]);
              return null;
            case "getAttributeNames":
              synchronized (attributes) {
                return Collections.enumeration(new ArrayList<>(attributes.keySet()));
              }
            case "invalidate":
              invalidated.set(true);
              return null;
            default:
              return EndedRequest.objectMethodOrDefault(proxy, method, args);
          }
        };
    return (HttpSession)
        Proxy.newProxyInstance(
            LateResponse.class.getClassLoader(), new Class<?>[] {HttpSession.class}, answers);
  }
}
