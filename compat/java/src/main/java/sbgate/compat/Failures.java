package sbgate.compat;

import com.azure.messaging.servicebus.ServiceBusException;
import com.azure.messaging.servicebus.ServiceBusFailureReason;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusSenderClient;

import java.time.Duration;
import java.time.Instant;
import java.util.HashSet;
import java.util.Set;

/** Refusals, each with the SDK's own error for it. */
final class Failures {
    private Failures() {
    }

    /** Sends one message and returns the ServiceBusException the SDK threw. */
    static ServiceBusException sendRefused(String connectionString, String queue, String what) {
        try (ServiceBusSenderClient s = Env.client(connectionString).sender().queueName(queue).buildClient()) {
            return Check.throwsA(ServiceBusException.class, what,
                () -> s.sendMessage(new ServiceBusMessage("must be refused")));
        }
    }

    static void wrongKey(Env env) throws Exception {
        ServiceBusException e = sendRefused(env.wrongKeyConn, env.entity("ERRORS"), "send with a wrong key");
        Check.equal("reason for a wrong key", ServiceBusFailureReason.UNAUTHORIZED, e.getReason());
        Check.that(!e.isTransient(), "a wrong key is reported as transient");
    }

    static void missingRight(Env env) throws Exception {
        ServiceBusException e = sendRefused(env.listenOnlyConn, env.entity("ERRORS"), "send with a Listen-only key");
        Check.equal("reason for a send without the Send right", ServiceBusFailureReason.UNAUTHORIZED, e.getReason());
        Check.that(!e.isTransient(), "a missing right is reported as transient");
    }

    static void missingEntity(Env env) throws Exception {
        ServiceBusException e = sendRefused(env.conn, env.entity("MISSING"), "send to a queue that does not exist");
        Check.equal("reason for a missing queue", ServiceBusFailureReason.MESSAGING_ENTITY_NOT_FOUND, e.getReason());
        Check.that(!e.isTransient(), "a missing entity is reported as transient");
    }

    /**
     * Not in the common list: sbgate has no transaction coordinator yet and refuses its attach with
     * amqp:not-implemented. createTransaction() must then fail soon, not hang until the client's
     * own timeout, with the SDK's error for that condition: azure-core-amqp's ExceptionUtil turns
     * amqp:not-implemented (and amqp:not-allowed) into an UnsupportedOperationException carrying
     * the broker's description, wrapped in a ServiceBusException.
     */
    static void transactionRefused(Env env) throws Exception {
        try (ServiceBusSenderClient s = env.client().sender().queueName(env.entity("TXN")).buildClient()) {
            Instant t0 = Instant.now();
            ServiceBusException e = Check.throwsA(ServiceBusException.class, "createTransaction", s::createTransaction);
            Duration took = Duration.between(t0, Instant.now());
            Check.that(took.compareTo(Duration.ofSeconds(15)) < 0,
                "createTransaction took " + took.toMillis() + " ms to fail: " + Scenarios.describe(e));
            UnsupportedOperationException refused = null;
            Set<Throwable> seen = new HashSet<>();
            for (Throwable c = e; c != null && seen.add(c); c = c.getCause()) {
                if (c instanceof UnsupportedOperationException u) {
                    refused = u;
                    break;
                }
            }
            Check.that(refused != null && refused.getMessage() != null && !refused.getMessage().isBlank(),
                "createTransaction did not fail with the SDK's error for amqp:not-implemented: " + Scenarios.describe(e));
            Check.that(!e.isTransient(), "the refused coordinator is reported as transient");
        }
    }
}
