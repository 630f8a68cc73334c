package dev.idempotency.spring;

import dev.idempotency.IdempotencyKey;
import dev.idempotency.IdempotencyWindows;
import java.lang.reflect.Method;
import java.lang.reflect.Type;
import java.time.Duration;
import java.time.format.DateTimeParseException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.springframework.context.expression.MethodBasedEvaluationContext;
import org.springframework.core.ParameterNameDiscoverer;
import org.springframework.core.ResolvableType;
import org.springframework.expression.Expression;
import org.springframework.expression.ParseException;
import org.springframework.expression.spel.SpelNode;
import org.springframework.expression.spel.ast.FunctionReference;
import org.springframework.expression.spel.ast.VariableReference;
import org.springframework.expression.spel.standard.SpelExpression;
import org.springframework.expression.spel.standard.SpelExpressionParser;
import org.springframework.util.ClassUtils;

/**
 * One {@link Idempotent} method as the starter runs it, worked out and checked once, when its bean
 * is proxied: the operation name, the parsed key expression (whose variables must be parameters),
 * the window, and how the method returns (a value, nothing, or a stage).
 */
final class IdempotentMethod {

  /** How the method returns its result. */
  enum Kind {
    VALUE,
    VOID,
    STAGE
  }

  private static final Pattern INDEXED = Pattern.compile("[pa](\\d+)");

  final String name;
  final Duration ttl;
  final Kind kind;
  final Type resultType;
  private final Method method;
  private final Expression key;
  private final String keySource;
  private final ParameterNameDiscoverer parameterNames;

  private IdempotentMethod(
      Method method,
      String name,
      Expression key,
      String keySource,
      Duration ttl,
      Kind kind,
      Type resultType,
      ParameterNameDiscoverer parameterNames) {
    this.method = method;
    this.name = name;
    this.key = key;
    this.keySource = keySource;
    this.ttl = ttl;
    this.kind = kind;
    this.resultType = resultType;
    this.parameterNames = parameterNames;
  }

  /**
   * Works out and checks an annotated method.
   *
   * @throws IllegalStateException naming the method and the problem, so that the application fails
   *     at startup
   */
  static IdempotentMethod of(
      Method method,
      Class<?> targetClass,
      Idempotent annotation,
      SpelExpressionParser parser,
      ParameterNameDiscoverer parameterNames) {
    String where =
        "@Idempotent on "
            + ClassUtils.getUserClass(targetClass).getName()
            + "."
            + method.getName()
            + "(..)";
    String name =
        annotation.name().isEmpty()
            ? ClassUtils.getUserClass(targetClass).getSimpleName() + "." + method.getName()
            : annotation.name();
    Expression key = parse(where, annotation.key(), parser);
    checkVariables(where, method, annotation.key(), (SpelExpression) key, parameterNames);
    Duration ttl = ttl(where, annotation.ttl());
    ResolvableType returnType = ResolvableType.forMethodReturnType(method, targetClass);
    Class<?> raw = returnType.resolve(Object.class);
    Kind kind;
    Type resultType;
    if (raw == void.class || raw == Void.class) {
      kind = Kind.VOID;
      resultType = Void.class;
    } else if (CompletionStage.class.isAssignableFrom(raw)) {
      if (raw != CompletionStage.class && raw != CompletableFuture.class) {
        throw new IllegalStateException(
            where + " returns " + raw.getName() + "; declare CompletionStage or CompletableFuture");
      }
      ResolvableType value = returnType.as(CompletionStage.class).getGeneric(0);
      if (value.resolve() == null || value.hasUnresolvableGenerics()) {
        throw new IllegalStateException(
            where
                + " returns a stage of an unknown type; declare it, as in CompletionStage<Receipt>");
      }
      kind = Kind.STAGE;
      resultType = concrete(value);
    } else if (isReactive(raw)) {
      throw new IllegalStateException(
          where
              + " returns "
              + raw.getName()
              + ", which is not supported; return a CompletionStage");
    } else {
      if (returnType.hasUnresolvableGenerics()) {
        throw new IllegalStateException(
            where + " returns a type that cannot be resolved for " + targetClass.getName());
      }
      kind = Kind.VALUE;
      resultType = concrete(returnType);
    }
    return new IdempotentMethod(
        method, name, key, annotation.key(), ttl, kind, resultType, parameterNames);
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

  private static Expression parse(String where, String source, SpelExpressionParser parser) {
    if (source.isBlank()) {
      throw new IllegalStateException(where + " has an empty key expression");
    }
    try {
      return parser.parseExpression(source);
    } catch (ParseException e) {
      // the message carries the parser's; no cause, so that this is the root cause Boot shows
      throw new IllegalStateException(
          where + ": the key '" + source + "' is not a valid SpEL expression: " + e.getMessage());
    }
  }

  /** Every {@code #variable} must be a parameter (by name, or {@code #p0}/{@code #a0}). */
  private static void checkVariables(
      String where,
      Method method,
      String source,
      SpelExpression expression,
      ParameterNameDiscoverer parameterNames) {
    String[] names = parameterNames.getParameterNames(method);
    List<String> problems = new ArrayList<>();
    visit(
        expression.getAST(),
        node -> {
          if (node instanceof FunctionReference) {
            problems.add(node.toStringAST() + " calls a function, and none are registered");
            return;
          }
          if (!(node instanceof VariableReference)) {
            return;
          }
          String variable = node.toStringAST().substring(1);
          if (variable.equals("this") || variable.equals("root")) {
            return;
          }
          Matcher indexed = INDEXED.matcher(variable);
          if (indexed.matches()) {
            if (Integer.parseInt(indexed.group(1)) >= method.getParameterCount()) {
              problems.add(
                  "#"
                      + variable
                      + " is past the method's "
                      + method.getParameterCount()
                      + " parameters");
            }
            return;
          }
          if (names == null) {
            problems.add(
                "#"
                    + variable
                    + " names a parameter, but parameter names are not available: compile with"
                    + " -parameters, or use #p0, #p1, ...");
          } else if (!Arrays.asList(names).contains(variable)) {
            problems.add(
                "#"
                    + variable
                    + " is not a parameter; the parameters are "
                    + String.join(", ", names));
          }
        });
    if (!problems.isEmpty()) {
      throw new IllegalStateException(
          where + ": the key '" + source + "' is wrong: " + String.join("; ", problems));
    }
  }

  private static void visit(SpelNode node, java.util.function.Consumer<SpelNode> visitor) {
    visitor.accept(node);
    for (int i = 0; i < node.getChildCount(); i++) {
      visit(node.getChild(i), visitor);
    }
  }

  private static Duration ttl(String where, String text) {
    if (text.isEmpty()) {
      return null;
    }
    try {
      return IdempotencyWindows.requireValidTtl(Duration.parse(text));
    } catch (DateTimeParseException e) {
      throw new IllegalStateException(
          where + ": ttl '" + text + "' is not an ISO-8601 duration such as PT24H");
    } catch (IllegalArgumentException e) {
      throw new IllegalStateException(where + ": " + e.getMessage());
    }
  }

  private static boolean isReactive(Class<?> type) {
    for (Class<?> c = type; c != null; c = c.getSuperclass()) {
      for (Class<?> i : ClassUtils.getAllInterfacesForClassAsSet(c)) {
        if (i.getName().equals("org.reactivestreams.Publisher")) {
          return true;
        }
      }
    }
    return false;
  }

  /**
   * The idempotency key of one call: the operation's name, then the expression's value.
   *
   * @throws IllegalArgumentException if the expression yields null
   */
  String key(Object target, Object[] arguments) {
    MethodBasedEvaluationContext context =
        new MethodBasedEvaluationContext(target, method, arguments, parameterNames);
    Object value = key.getValue(context);
    if (value == null) {
      throw new IllegalArgumentException(
          "the key '" + keySource + "' of " + name + " evaluated to null");
    }
    return IdempotencyKey.of(name, value.toString());
  }
}
