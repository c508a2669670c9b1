// LocalStack starts DynamoDB Local with -javaagent:ddb-local-loader-0.1.jar, a patch jar it
// downloads from a host we cannot reach. DynamoDB Local runs fine without the patch, so
// this agent does nothing; it exists only so the JVM finds the jar it was told to load.
import java.lang.instrument.Instrumentation;

public final class NoopAgent {
    public static void premain(String args, Instrumentation instrumentation) {}
}
