package sbgate.compat;

import java.io.PrintStream;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

/**
 * Runs the scenarios every client stack runs against sbgate (compat/broker_test.go's
 * commonScenarios), with azure-messaging-servicebus' public API, and prints one line per scenario:
 * {@code SCENARIO <name> PASS}, {@code SCENARIO <name> FAIL <why>} or {@code SCENARIO <name> SKIP
 * <why>}. Scenarios run in parallel threads, each on its own connection and its own entities (named
 * in SB_ENTITY_* variables by the Go test), so one failure does not cascade; a scenario that does
 * not end within {@link #PER_SCENARIO} is reported FAIL and left behind, and the JVM exits when
 * every scenario has been reported.
 */
public final class Scenarios {
    /** The longest one scenario may take; the Go test bounds the whole run as well. */
    static final Duration PER_SCENARIO = Duration.ofSeconds(120);

    /** How many scenarios run at once: they mostly wait on the broker, and the machine has 2 cores. */
    static final int PARALLEL = 6;

    @FunctionalInterface
    interface Scenario {
        void run(Env env) throws Exception;
    }

    private Scenarios() {
    }

    /**
     * The scenarios by name, in the order of commonScenarios, then this stack's own. A scenario
     * whose value is a String is one the SDK cannot express: the String says why.
     */
    static Map<String, Object> all() {
        Map<String, Object> s = new LinkedHashMap<>();
        s.put("send-property-types", (Scenario) Messaging::sendPropertyTypes);
        s.put("send-body-kinds", (Scenario) Messaging::sendBodyKinds);
        s.put("receive-and-delete", (Scenario) Messaging::receiveAndDelete);
        s.put("peek-lock-complete", (Scenario) Messaging::peekLockComplete);
        s.put("abandon-with-properties", (Scenario) Messaging::abandonWithProperties);
        s.put("defer-receive-deferred", (Scenario) Messaging::deferReceiveDeferred);
        s.put("dead-letter-reason", (Scenario) Messaging::deadLetterReason);
        s.put("renew-lock", (Scenario) Messaging::renewLock);
        s.put("peek", (Scenario) Messaging::peek);
        s.put("schedule-cancel-queue", (Scenario) Messaging::scheduleCancelQueue);
        s.put("schedule-cancel-topic", (Scenario) Messaging::scheduleCancelTopic);
        s.put("session-state", (Scenario) Sessions::sessionState);
        s.put("session-empty-id", (Scenario) Sessions::sessionEmptyId);
        s.put("list-sessions", Sessions.LIST_SESSIONS_UNSUPPORTED);
        s.put("rules", (Scenario) Rules::rules);
        s.put("batch", (Scenario) Messaging::batch);
        s.put("large-message", (Scenario) Messaging::largeMessage);
        s.put("websockets", (Scenario) Transports::websockets);
        s.put("wrong-key", (Scenario) Failures::wrongKey);
        s.put("missing-right", (Scenario) Failures::missingRight);
        s.put("missing-entity", (Scenario) Failures::missingEntity);
        // This stack's own, beyond the common list.
        s.put("amqps", (Scenario) Transports::amqps);
        s.put("transaction-commit", (Scenario) Transactions::commit);
        s.put("transaction-rollback", (Scenario) Transactions::rollback);
        s.put("transaction-cross-entity", (Scenario) Transactions::crossEntity);
        s.put("transaction-lock-lapsed", (Scenario) Transactions::lockLapsed);
        s.put("transaction-timeout", (Scenario) Transactions::timeout);
        return s;
    }

    public static void main(String[] args) throws Exception {
        final PrintStream out = System.out;
        final Env env = Env.fromEnvironment();
        env.trustCaFile();

        Map<String, Object> all = all();
        // SCENARIOS=a,b runs only those (for a developer chasing one failure).
        String only = System.getenv("SCENARIOS");
        if (only != null && !only.isBlank()) {
            Set<String> keep = new HashSet<>(Arrays.asList(only.split(",")));
            all.keySet().retainAll(keep);
        }

        Reporter reporter = new Reporter(out);
        ExecutorService pool = Executors.newFixedThreadPool(PARALLEL, r -> {
            Thread t = new Thread(r, "scenario");
            t.setDaemon(true);
            return t;
        });
        Map<String, Future<?>> futures = new LinkedHashMap<>();
        Map<String, Instant> started = new java.util.concurrent.ConcurrentHashMap<>();
        for (Map.Entry<String, Object> e : all.entrySet()) {
            String name = e.getKey();
            if (e.getValue() instanceof String why) {
                reporter.report(name, "SKIP " + why);
                continue;
            }
            Scenario scenario = (Scenario) e.getValue();
            futures.put(name, pool.submit(() -> {
                started.put(name, Instant.now());
                Thread.currentThread().setName("scenario " + name);
                try {
                    scenario.run(env);
                    reporter.report(name, "PASS");
                } catch (Throwable t) {
                    reporter.report(name, "FAIL " + describe(t));
                }
            }));
        }
        pool.shutdown();

        // Report the scenarios that overrun; everything else reports itself. The Go test gives the
        // whole run SB_RUN_SECONDS: what has not ended by then is reported, so the run ends by
        // itself before the test's own timeout kills it.
        String runSeconds = System.getenv("SB_RUN_SECONDS");
        Instant runDeadline = Instant.now().plusSeconds(runSeconds == null ? 270 : Long.parseLong(runSeconds));
        while (!reporter.reportedAll(all.keySet())) {
            pool.awaitTermination(250, TimeUnit.MILLISECONDS);
            Instant now = Instant.now();
            if (now.isAfter(runDeadline)) {
                for (String name : all.keySet()) {
                    reporter.report(name, started.containsKey(name)
                        ? "FAIL did not end before the run's deadline"
                        : "FAIL did not start before the run's deadline (the scenarios before it overran)");
                }
                break;
            }
            for (Map.Entry<String, Future<?>> e : futures.entrySet()) {
                Instant t0 = started.get(e.getKey());
                if (t0 != null && !e.getValue().isDone() && now.isAfter(t0.plus(PER_SCENARIO))) {
                    reporter.report(e.getKey(), "FAIL did not end within " + PER_SCENARIO.toSeconds() + " s");
                    e.getValue().cancel(true);
                }
            }
        }
        out.flush();
        // The SDK's reactor threads of a scenario that overran may still run: end the JVM.
        System.exit(0);
    }

    /** One line: the error's type and message, with its causes, as the FAIL verdict's why. */
    static String describe(Throwable t) {
        List<String> parts = new ArrayList<>();
        Set<Throwable> seen = new HashSet<>();
        for (Throwable c = t; c != null && seen.add(c) && parts.size() < 4; c = c.getCause()) {
            String extra = "";
            if (c instanceof com.azure.messaging.servicebus.ServiceBusException sbe) {
                extra = " [reason " + sbe.getReason() + "]";
            } else if (c instanceof com.azure.core.amqp.exception.AmqpException ae && ae.getErrorCondition() != null) {
                extra = " [condition " + ae.getErrorCondition().getErrorCondition() + "]";
            }
            parts.add(c.getClass().getName() + ": " + c.getMessage() + extra);
        }
        return String.join(" <- caused by ", parts).replace('\n', ' ').replace('\r', ' ');
    }

    /** Prints each scenario's verdict once, whole lines only, from whichever thread has it. */
    static final class Reporter {
        private final PrintStream out;
        private final Set<String> reported = new HashSet<>();

        Reporter(PrintStream out) {
            this.out = out;
        }

        synchronized void report(String name, String verdict) {
            if (reported.add(name)) {
                out.println("SCENARIO " + name + " " + verdict);
                out.flush();
            }
        }

        synchronized boolean reportedAll(Set<String> names) {
            return reported.containsAll(names);
        }
    }
}
