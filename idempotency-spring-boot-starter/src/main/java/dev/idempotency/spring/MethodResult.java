package dev.idempotency.spring;

import dev.idempotency.spring.IdempotentMethod.Kind;
import java.lang.reflect.Method;
import java.lang.reflect.Type;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import org.springframework.core.ResolvableType;

/**
 * How an {@link Idempotent} method returns its result, worked out once from its declared return
 * type: the {@link Kind} (a value, nothing, a stage or a Mono) and the type of the value the guard
 * stores and replays, as a plain {@link Type} a JSON mapper understands.
 */
record MethodResult(Kind kind, Type type) {

  /** Reactor's {@code Mono}, named so that this class loads without Reactor. */
  private static final String MONO_CLASS = "reactor.core.publisher.Mono";

  /**
   * The result of {@code method} as {@code targetClass} declares it.
   *
   * @param where the method as messages name it
   * @throws IllegalStateException if the guard cannot store and replay what the method returns
   */
  static MethodResult of(String where, Method method, Class<?> targetClass) {
    ResolvableType returnType = ResolvableType.forMethodReturnType(method, targetClass);
    Class<?> raw = returnType.resolve(Object.class);
    if (raw == void.class || raw == Void.class) {
      return new MethodResult(Kind.VOID, Void.class);
    }
    if (CompletionStage.class.isAssignableFrom(raw)) {
      if (raw != CompletionStage.class && raw != CompletableFuture.class) {
        throw new IdempotencyConfigurationException(
            where + " returns " + raw.getName() + ", a stage type that is not supported.",
            "Declare CompletionStage or CompletableFuture.");
      }
      ResolvableType value = returnType.as(CompletionStage.class).getGeneric(0);
      if (value.resolve() == null || value.hasUnresolvableGenerics()) {
        throw new IdempotencyConfigurationException(
            where + " returns a stage of an unknown type, so its result cannot be stored.",
            "Declare its type, as in CompletionStage<Receipt>.");
      }
      return new MethodResult(Kind.STAGE, concrete(value));
    }
    if (raw.getName().equals(MONO_CLASS)) {
      ResolvableType value = returnType.getGeneric(0);
      if (value.resolve() == null || value.hasUnresolvableGenerics()) {
        throw new IdempotencyConfigurationException(
            where + " returns a Mono of an unknown type, so its result cannot be stored.",
            "Declare its type, as in Mono<Receipt>.");
      }
      Class<?> element = value.resolve(Object.class);
      return new MethodResult(Kind.MONO, element == Void.class ? Void.class : concrete(value));
    }
    if (isReactive(raw)) {
      throw new IdempotencyConfigurationException(
          where
              + " returns "
              + raw.getName()
              + ", which is not supported: a stream of elements is not one result to store and"
              + " replay.",
          "Return a Mono (of a List, to keep several elements) or a CompletionStage.");
    }
    if (returnType.hasUnresolvableGenerics()) {
      throw new IdempotencyConfigurationException(
          where + " returns a type that cannot be resolved for " + targetClass.getName() + ".",
          "Declare a return type without unresolved type variables, so that its result can be"
              + " stored and replayed.");
    }
    return new MethodResult(Kind.VALUE, concrete(returnType));
  }

  /**
   * A resolved type as a plain {@link Type} a JSON mapper understands: a class, or a parameterized
   * type whose arguments are resolved too (never a type variable of a superclass or interface).
   */
  static Type concrete(ResolvableType type) {
    Class<?> raw = type.resolve(Object.class);
    if (type.isArray()) {
      Type component = concrete(type.getComponentType());
      return component instanceof Class<?> c
          ? java.lang.reflect.Array.newInstance(c, 0).getClass()
          : (java.lang.reflect.GenericArrayType) () -> component;
    }
    if (!type.hasGenerics()) {
      return raw;
    }
    ResolvableType[] generics = type.getGenerics();
    Type[] arguments = new Type[generics.length];
    for (int i = 0; i < generics.length; i++) {
      arguments[i] = concrete(generics[i]);
    }
    return new ResolvedParameterizedType(raw, arguments);
  }

  /** A parameterized type built from resolved parts. */
  private record ResolvedParameterizedType(Class<?> raw, Type[] arguments)
      implements java.lang.reflect.ParameterizedType {
    @Override
    public Type[] getActualTypeArguments() {
      return arguments.clone();
    }

    @Override
    public Type getRawType() {
      return raw;
    }

    @Override
    public Type getOwnerType() {
      return raw.getDeclaringClass();
    }

    @Override
    public String getTypeName() {
      StringBuilder name = new StringBuilder(raw.getTypeName()).append('<');
      for (int i = 0; i < arguments.length; i++) {
        name.append(i > 0 ? ", " : "").append(arguments[i].getTypeName());
      }
      return name.append('>').toString();
    }
  }

  /**
   * Whether the type is a Reactive Streams {@code Publisher}, through any interface of it or of its
   * superclasses, however deep: {@code Mono} and {@code Flux} implement {@code CorePublisher},
   * which extends it.
   */
  private static boolean isReactive(Class<?> type) {
    for (Class<?> c = type; c != null; c = c.getSuperclass()) {
      if (extendsPublisher(c)) {
        return true;
      }
    }
    return false;
  }

  private static boolean extendsPublisher(Class<?> type) {
    if (type.getName().equals("org.reactivestreams.Publisher")) {
      return true;
    }
    for (Class<?> i : type.getInterfaces()) {
      if (extendsPublisher(i)) {
        return true;
      }
    }
    return false;
  }
}
