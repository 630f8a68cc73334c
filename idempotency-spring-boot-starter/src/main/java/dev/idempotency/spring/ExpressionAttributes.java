package dev.idempotency.spring;

import java.lang.reflect.InaccessibleObjectException;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.jspecify.annotations.Nullable;
import org.springframework.core.convert.ConversionException;
import org.springframework.core.convert.ConversionFailedException;
import org.springframework.expression.AccessException;
import org.springframework.expression.EvaluationException;
import org.springframework.expression.Expression;
import org.springframework.expression.ExpressionInvocationTargetException;
import org.springframework.expression.ParseException;
import org.springframework.expression.spel.SpelCompilerMode;
import org.springframework.expression.spel.SpelEvaluationException;
import org.springframework.expression.spel.SpelMessage;
import org.springframework.expression.spel.SpelNode;
import org.springframework.expression.spel.SpelParserConfiguration;
import org.springframework.expression.spel.ast.BeanReference;
import org.springframework.expression.spel.ast.FunctionReference;
import org.springframework.expression.spel.ast.VariableReference;
import org.springframework.expression.spel.standard.SpelExpression;
import org.springframework.expression.spel.standard.SpelExpressionParser;

/**
 * An annotation attribute that holds a SpEL expression over a method's parameters (a key, a
 * fingerprint), parsed and checked once at startup, so that a typo fails the application instead of
 * every call. For the starter's integrations; stateless.
 */
public final class ExpressionAttributes {

  private static final Pattern INDEXED = Pattern.compile("[pa](\\d+)");

  /*
   * The codes under which SpEL (6.2 and 7.0) wraps the failure of code it called to read, write,
   * invoke or construct, with the accessor's or executor's AccessException between them: a
   * property's read (PropertyOrFieldReference) or write (it, and the indexer), the indexer's read
   * of an object's property (INDEXING_NOT_SUPPORTED_FOR_TYPE, which it also raises with no cause
   * when no accessor can read the name), an IndexAccessor's read or write, a method that could not
   * be invoked (its own exception SpEL throws as it is), a constructor, a function. Any other code
   * is SpEL's own verdict on the values (NOT_COMPARABLE around a ClassCastException,
   * INVALID_PATTERN around a PatternSyntaxException), but TYPE_CONVERSION_ERROR, which may wrap
   * the application's code (conversionRanApplicationCode).
   */
  private static final Set<SpelMessage> WRAP_A_CALL =
      EnumSet.of(
          SpelMessage.EXCEPTION_DURING_PROPERTY_READ,
          SpelMessage.EXCEPTION_DURING_PROPERTY_WRITE,
          SpelMessage.INDEXING_NOT_SUPPORTED_FOR_TYPE,
          SpelMessage.EXCEPTION_DURING_INDEX_READ,
          SpelMessage.EXCEPTION_DURING_INDEX_WRITE,
          SpelMessage.EXCEPTION_DURING_METHOD_INVOCATION,
          SpelMessage.CONSTRUCTOR_INVOCATION_PROBLEM,
          SpelMessage.EXCEPTION_DURING_FUNCTION_CALL);

  /*
   * Interpreted, never compiled, whatever spring.expression.compiler.mode says (a JVM system
   * property or a spring.properties entry): in Spring 6.2 and 7.0 that setting is only the default
   * of a SpelParserConfiguration that names no mode, and an explicit mode wins over it. A compiled
   * expression reports anything thrown inside it as one SpelEvaluationException
   * (EXCEPTION_RUNNING_COMPILED_EXPRESSION), so failedOnItsInput could not tell a look-up's own
   * failure, which may pass, from an expression that fails on its input: a getter that timed out
   * once would be an invalid key, a listener's poison message, a lost send. (MIXED would evaluate
   * the failed expression again, interpreted: the look-up called twice.) Keys and fingerprints are
   * short and evaluated once a call, next to a store's round trip: compiling them buys nothing
   * measurable. This constructor, not the builder: the builder is not in Spring 6.2.
   */
  private static final SpelExpressionParser PARSER =
      new SpelExpressionParser(new SpelParserConfiguration(SpelCompilerMode.OFF, null));

  /**
   * Whether a class came from one of Spring's own jars ({@link #fromSpringsOwnJar}), once a class.
   */
  private static final ClassValue<Boolean> SPRINGS_OWN =
      new ClassValue<>() {
        @Override
        protected Boolean computeValue(Class<?> type) {
          return fromSpringsOwnJar(type);
        }
      };

  private ExpressionAttributes() {}

  /**
   * The parser of the starter's expressions: they are interpreted, never compiled, whatever {@code
   * spring.expression.compiler.mode} says, so that {@link #failedOnItsInput} sees the interpreter's
   * exceptions (a compiled expression wraps whatever it threw in one exception, and a look-up that
   * failed once would be taken for a key that cannot be evaluated). Thread-safe.
   *
   * @return the shared parser
   */
  public static SpelExpressionParser parser() {
    return PARSER;
  }

  /**
   * Parses a non-blank expression.
   *
   * @param where the annotated method as messages name it
   * @param attribute the attribute's name ({@code key}, {@code fingerprint})
   * @param source the expression as written in the attribute
   * @param parser the parser to use
   * @return the parsed expression
   * @throws IllegalStateException with the parser's message, if the expression is not valid
   */
  public static Expression parse(
      String where, String attribute, String source, SpelExpressionParser parser) {
    try {
      return parser.parseExpression(source);
    } catch (ParseException e) {
      // the message carries the parser's; no cause, so that this is the root cause Boot shows
      throw new IdempotencyConfigurationException(
          named(where, attribute, source) + " is not a valid SpEL expression: " + e.getMessage(),
          "Correct the expression: SpEL over the method's parameters, such as #orderId or"
              + " #event.id.");
    }
  }

  /**
   * Checks every {@code #variable} of a parsed expression (but {@code #this} and {@code #root})
   * with {@code variableProblem}, and refuses function calls (none are registered).
   *
   * @param where the annotated method as messages name it
   * @param attribute the attribute's name ({@code key}, {@code fingerprint})
   * @param source the expression as written in the attribute
   * @param expression the parsed expression ({@link #parse})
   * @param variableProblem what is wrong with a variable, named without its {@code #}; or null
   * @throws IllegalStateException naming the method, the attribute and every problem found
   */
  public static void checkVariables(
      String where,
      String attribute,
      String source,
      Expression expression,
      Function<String, @Nullable String> variableProblem) {
    List<String> problems = new ArrayList<>();
    visit(
        ((SpelExpression) expression).getAST(),
        node -> {
          if (node instanceof FunctionReference) {
            problems.add(node.toStringAST() + " calls a function, and none are registered");
            return;
          }
          if (node instanceof BeanReference) {
            // evaluated without a bean resolver: it would fail on every call
            problems.add(node.toStringAST() + " refers to a bean, and none can be reached");
            return;
          }
          if (!(node instanceof VariableReference)) {
            return;
          }
          String variable = node.toStringAST().substring(1);
          if (variable.equals("this") || variable.equals("root")) {
            return;
          }
          String problem = variableProblem.apply(variable);
          if (problem != null) {
            problems.add(problem);
          }
        });
    if (!problems.isEmpty()) {
      throw new IdempotencyConfigurationException(
          named(where, attribute, source) + " is wrong: " + String.join("; ", problems) + ".",
          "Refer only to the method's parameters, by name (#orderId, which needs the -parameters"
              + " compiler flag) or by position (#p0, #a0); call no functions and refer to no"
              + " beans (a static method works: T(com.example.Keys).of(#p0)).");
    }
  }

  /**
   * Whether an expression's evaluation failed on the values it was given (a property they lack, a
   * method called on null, an index out of range, a value of the wrong type, one that Spring's own
   * converters cannot convert to a parameter's type, such as a String that is not a number for a
   * {@code long}): the same failure for the same values every time, so they cannot be keyed. Not so
   * when code the expression calls threw (a method, SpEL lets its unchecked exception out as it is
   * and wraps a checked one in an {@link ExpressionInvocationTargetException}; a getter or setter,
   * whether reached as {@code #o.ref} or through the indexer as {@code #o['ref']}, a constructor,
   * whose exception SpEL wraps in its own {@link SpelEvaluationException} under one of several
   * codes), nor when the conversion of an argument ran the application's code and it threw (a
   * type's static {@code valueOf}, {@code of} or {@code from}, its one-argument constructor or its
   * {@code to…()} method, which the conversion service calls: SpEL's TYPE_CONVERSION_ERROR around a
   * {@link ConversionFailedException} whose cause is what that code threw): that code's own
   * failure, which may pass (a look-up that timed out), as when the expression calls it itself. An
   * expression that ran compiled ({@link #parser()} never compiles; another parser may) wraps
   * whatever it threw in one {@link SpelEvaluationException} that cannot be told apart: not its
   * input's failure, so retried, never dropped as a poison message.
   *
   * @param e the evaluation's failure
   * @return true if it is the expression's own failure for these values
   */
  public static boolean failedOnItsInput(EvaluationException e) {
    if (e instanceof ExpressionInvocationTargetException) {
      return false;
    }
    if (!(e instanceof SpelEvaluationException spel)) {
      return true;
    }
    if (spel.getMessageCode() == SpelMessage.EXCEPTION_RUNNING_COMPILED_EXPRESSION) {
      return false;
    }
    if (spel.getMessageCode() == SpelMessage.TYPE_CONVERSION_ERROR) {
      return !conversionRanApplicationCode(e.getCause());
    }
    return !WRAP_A_CALL.contains(spel.getMessageCode()) || !calledCodeThrew(e.getCause());
  }

  /**
   * Whether the cause chain beneath a code that wraps a call holds the called code's own exception:
   *
   * <ol>
   *   <li>an InvocationTargetException: reflection reached the code, and it threw;
   *   <li>an EvaluationException: SpEL's own failure inside the call (an argument's or a written
   *       value's conversion, which may have run the application's code), judged as a whole;
   *   <li>an AccessException: the accessor's or executor's wrapper, looked through;
   *   <li>reflection that could not call the code (IllegalAccessException, an inaccessible member)
   *       or a conversion's failure: the same every time, not the code's;
   *   <li>anything else: what a non-reflective accessor or what it called threw as it was (a map's
   *       {@code get}, an IndexAccessor).
   * </ol>
   *
   * A chain of wrappers alone (an accessor that found no such property) is no call's failure.
   */
  private static boolean calledCodeThrew(@Nullable Throwable cause) {
    for (Throwable t = cause; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof InvocationTargetException) {
        return true;
      }
      if (t instanceof EvaluationException nested) {
        return !failedOnItsInput(nested);
      }
      if (t instanceof AccessException) {
        continue;
      }
      return !(t instanceof ReflectiveOperationException
          || t instanceof InaccessibleObjectException
          || t instanceof ConversionException);
    }
    return false;
  }

  /**
   * Whether a conversion's failure (the {@link ConversionException} SpEL's TYPE_CONVERSION_ERROR
   * wraps: an argument converted to a method's or constructor's parameter type, a value written to
   * a property, an index) is the failure of the application's code the conversion service called.
   * Spring's own converters (numbers, booleans, enums by name or ordinal, UUIDs, locales, charsets,
   * collections, arrays) fail in the JDK's or Spring's code on the value's shape (unparsable, out
   * of range, no such constant, a null for a primitive): the input's failure, the same every time.
   * The generic ones (ObjectToObjectConverter, IdToEntityConverter,
   * FallbackObjectToStringConverter) call a member of the source's or the target's type: a static
   * {@code valueOf}, {@code of}, {@code from} or {@code find…}, a one-argument constructor, {@code
   * to…()} or {@code toString()}. Where that member is the application's (an enum's too), its code
   * ran (a look-up, which may time out) and what it threw is the {@link
   * ConversionFailedException}'s cause (ObjectToObjectConverter unwraps the
   * InvocationTargetException): the called code's failure, as when the expression calls the same
   * member itself. Told by where it was thrown, not by the types: a frame of code that is neither
   * the JDK's nor Spring's, or a proxy's (the member called through it, refused by an interceptor
   * before the application's code ran), above the conversion service's own frames, or none of the
   * conversion's frames at all ({@link #thrownFromApplicationCode}), in what was thrown or in its
   * causes (whatever its type: an application may throw an InvocationTargetException of its own).
   * No converter (ConverterNotFoundException), and reflection that could not call the member, throw
   * from the JDK's and Spring's frames only: the input's.
   */
  private static boolean conversionRanApplicationCode(@Nullable Throwable cause) {
    if (!(cause instanceof ConversionFailedException failed)) {
      return false;
    }
    for (Throwable t = failed.getCause(); t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (thrownFromApplicationCode(t)) {
        return true;
      }
    }
    return false;
  }

  /**
   * Whether {@code thrown} is not the conversion's own failure: a frame of its stack above the
   * conversion service's and SpEL's (where the conversion was called from) is neither the JDK's nor
   * Spring's (the application's code, or a library's it called), or is a proxy's ({@link
   * #isProxyBoundary}); or it has no frame of theirs at all. The conversion service and Spring's
   * converters throw on the conversion's own stack; what was thrown beyond a proxy came from the
   * code the call entered (an interceptor of Spring's that refused the call before the
   * application's method ran, such as {@code @ConcurrencyLimit}'s rejection: only Spring's and the
   * JDK's frames, the called code's failure all the same); what carries none of the conversion's
   * frames was made elsewhere (on another thread, as what {@code join()} throws for a future that
   * timed out) or without a stack trace (preallocated, a client's stackless exception, an exception
   * the JIT throws fast): the called code's, retried, never a bad key.
   */
  private static boolean thrownFromApplicationCode(Throwable thrown) {
    for (StackTraceElement frame : thrown.getStackTrace()) {
      String name = frame.getClassName();
      if (name.startsWith("org.springframework.core.convert.")
          || name.startsWith("org.springframework.expression.")) {
        return false;
      }
      if (!isPlatformOrSpring(frame) || isProxyBoundary(frame)) {
        return true;
      }
    }
    return true;
  }

  /**
   * Whether {@code frame} is a proxy's, the boundary of the code a call entered: a JDK dynamic
   * proxy (a class of a {@code jdk.proxy…} module, or named {@code $Proxy…}: {@code
   * com.sun.proxy.$Proxy12}, or in a non-public interface's package), a CGLIB proxy ({@code
   * $$SpringCGLIB$$}, {@code $$EnhancerBySpringCGLIB$$}, {@code $$EnhancerByCGLIB$$} in its name),
   * or spring-aop's proxy machinery ({@code JdkDynamicAopProxy}, {@code CglibAopProxy}, {@code
   * ReflectiveMethodInvocation}). Spring's converters call no proxy of their own on the way to
   * their verdict on a value: a proxy on the stack of what was thrown is the application's bean, or
   * a library's, that the conversion called (its {@code to…()}, {@code valueOf}), and whatever its
   * interceptors throw is that call's failure.
   */
  private static boolean isProxyBoundary(StackTraceElement frame) {
    String module = frame.getModuleName();
    if (module != null && module.startsWith("jdk.proxy")) {
      return true;
    }
    String name = frame.getClassName();
    if (name.startsWith("$Proxy", name.lastIndexOf('.') + 1)
        || name.contains("$$SpringCGLIB$$")
        || name.contains("$$EnhancerBySpringCGLIB$$")
        || name.contains("$$EnhancerByCGLIB$$")) {
      return true;
    }
    return name.equals("org.springframework.aop.framework.JdkDynamicAopProxy")
        || name.equals("org.springframework.aop.framework.ReflectiveMethodInvocation")
        || name.startsWith("org.springframework.aop.framework.CglibAopProxy");
  }

  /**
   * Whether {@code frame} is the JDK's (its module's, or a class only the JDK may define:
   * reflection's generated accessors have no module) or Spring's: a class under {@code
   * org.springframework.} of the packages a conversion runs through (core, util, beans, expression,
   * cglib, aop: told by name, so that they count wherever Spring was loaded from, shaded into one
   * jar too), or of another package that came from one of Spring's own jars ({@link
   * #fromSpringsOwnJar}): spring-web's {@code MediaType.valueOf} refusing a value is Spring's
   * verdict on it, while an application's code under {@code org.springframework.} (Spring's own
   * sample applications live under {@code org.springframework.samples}) is the application's. And
   * {@code javax.} and {@code sun.} classes outside the JDK's modules are a library's.
   */
  private static boolean isPlatformOrSpring(StackTraceElement frame) {
    String module = frame.getModuleName();
    if (module != null && (module.startsWith("java.") || module.startsWith("jdk."))) {
      return true;
    }
    String name = frame.getClassName();
    if (name.startsWith("java.") || name.startsWith("jdk.")) {
      return true;
    }
    if (!name.startsWith("org.springframework.")) {
      return false;
    }
    if (name.startsWith("org.springframework.core.")
        || name.startsWith("org.springframework.util.")
        || name.startsWith("org.springframework.beans.")
        || name.startsWith("org.springframework.expression.")
        || name.startsWith("org.springframework.cglib.")
        || name.startsWith("org.springframework.aop.")) {
      return true;
    }
    if (module != null) {
      // on the module path: Spring's jars are the modules spring.core, spring.web, spring.boot, ...
      return module.startsWith("spring.");
    }
    Class<?> type = loaded(name);
    return type != null && SPRINGS_OWN.get(type);
  }

  /**
   * The class a frame names, as the starter's class loader or the thread's context class loader
   * (the application's, where it has one of its own) sees it; null if neither finds it. Not
   * initialized: a frame's class was loaded already.
   */
  private static @Nullable Class<?> loaded(String name) {
    ClassLoader context = Thread.currentThread().getContextClassLoader();
    for (ClassLoader loader :
        new ClassLoader[] {ExpressionAttributes.class.getClassLoader(), context}) {
      if (loader == null) {
        continue;
      }
      try {
        return Class.forName(name, false, loader);
      } catch (ClassNotFoundException | LinkageError notThere) {
        // the next loader
      }
    }
    return null;
  }

  /**
   * Whether {@code type} came from one of Spring's own jars, told by what its class loader read
   * from the jar's manifest when it defined the class's package (as {@code SpringVersion} reads
   * Spring's version), without reading anything more (no I/O: a key may be evaluated on a Netty
   * event loop): an {@code Implementation-Title} that starts with "spring", as the jars of Spring
   * Framework, Boot, AMQP, Kafka, Security and Data have ({@code spring-web}, {@code
   * spring-rabbit}, {@code Spring Boot}, {@code Spring Data Core}); on the module path, a module
   * named {@code spring.…} (their {@code Automatic-Module-Name}: spring.web, spring.boot). Wherever
   * the jar is: on the class path, nested in a Spring Boot fat jar ({@code BOOT-INF/lib}) or in a
   * war's {@code WEB-INF/lib}. Not classes compiled into a directory (no manifest), nor a jar with
   * another title or none: the application's, or a library's.
   */
  static boolean fromSpringsOwnJar(Class<?> type) {
    Module module = type.getModule();
    if (module.isNamed()) {
      return module.getName().startsWith("spring.");
    }
    String title = type.getPackage() == null ? null : type.getPackage().getImplementationTitle();
    return title != null && title.regionMatches(true, 0, "spring", 0, "spring".length());
  }

  /**
   * What is wrong with {@code variable} as a parameter of {@code method} (by name, or {@code #p0} /
   * {@code #a0}), or {@code null} if it is one.
   *
   * @param variable the variable's name, without its {@code #}
   * @param method the annotated method
   * @param names the method's parameter names, or {@code null} if they are not available
   * @param alsoKnown appended to the list of parameters in a message, for the caller's own
   *     variables; empty for none
   * @return what is wrong with the variable, or {@code null} if it names a parameter
   */
  public static @Nullable String parameterProblem(
      String variable, Method method, String @Nullable [] names, String alsoKnown) {
    Matcher indexed = INDEXED.matcher(variable);
    if (indexed.matches()) {
      return Integer.parseInt(indexed.group(1)) >= method.getParameterCount()
          ? "#" + variable + " is past the method's " + method.getParameterCount() + " parameters"
          : null;
    }
    if (names == null) {
      return "#"
          + variable
          + " names a parameter, but parameter names are not available: compile with"
          + " -parameters, or use #p0, #p1, ...";
    }
    if (!Arrays.asList(names).contains(variable)) {
      return "#"
          + variable
          + " is not a parameter; the parameters are "
          + String.join(", ", names)
          + alsoKnown;
    }
    return null;
  }

  /** The attribute as messages name it: {@code @Idempotent on a.B.send(..): the key '#id'}. */
  private static String named(String where, String attribute, String source) {
    return where + ": the " + attribute + " '" + source + "'";
  }

  private static void visit(SpelNode node, Consumer<SpelNode> visitor) {
    visitor.accept(node);
    for (int i = 0; i < node.getChildCount(); i++) {
      visit(node.getChild(i), visitor);
    }
  }
}
