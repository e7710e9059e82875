package sbgate.compat;

import com.azure.messaging.servicebus.ServiceBusException;
import com.azure.messaging.servicebus.ServiceBusFailureReason;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusSenderClient;

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
}
