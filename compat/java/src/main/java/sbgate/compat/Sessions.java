package sbgate.compat;

import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import com.azure.messaging.servicebus.ServiceBusSessionReceiverClient;
import com.azure.messaging.servicebus.models.ServiceBusReceiveMode;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.util.Arrays;

/** Session scenarios: state, the session "", and listing (which this SDK cannot do). */
final class Sessions {
    private Sessions() {
    }

    /**
     * azure-messaging-servicebus 7.17.19 has no API that lists sessions: ServiceBusSessionReceiverClient
     * offers acceptSession and acceptNextSession only, ServiceBusAdministrationClient has no session
     * call, and the SDK's $management operations (ManagementConstants) do not include
     * com.microsoft:get-message-sessions.
     */
    static final String LIST_SESSIONS_UNSUPPORTED = "azure-messaging-servicebus 7.17.19 has no API to list sessions "
        + "(no get-message-sessions: ServiceBusSessionReceiverClient offers only acceptSession/acceptNextSession)";

    static ServiceBusSessionReceiverClient sessionReceiver(ServiceBusClientBuilder b, String queue) {
        return b.sessionReceiver().queueName(queue).receiveMode(ServiceBusReceiveMode.PEEK_LOCK)
            .disableAutoComplete().maxAutoLockRenewDuration(Duration.ZERO).buildClient();
    }

    static void sessionState(Env env) throws Exception {
        String q = env.entity("SESSION_STATE");
        ServiceBusClientBuilder b = env.client();
        byte[] state = "state: step 2 of 3 \u00e9".getBytes(StandardCharsets.UTF_8);
        try (ServiceBusSenderClient s = b.sender().queueName(q).buildClient();
             ServiceBusSessionReceiverClient sessions = sessionReceiver(b, q)) {
            s.sendMessage(new ServiceBusMessage("in session s-1").setMessageId("session-1").setSessionId("s-1"));
            s.sendMessage(new ServiceBusMessage("in session s-2").setMessageId("session-2").setSessionId("s-2"));

            try (ServiceBusReceiverClient r = sessions.acceptSession("s-1")) {
                Check.equal("accepted session id", "s-1", r.getSessionId());
                Check.equal("state of a new session", null, r.getSessionState());
                ServiceBusReceivedMessage m = Env.receiveOne(r, Env.RECEIVE_WAIT, "the message of session s-1");
                Check.equal("message id", "session-1", m.getMessageId());
                Check.equal("message session id", "s-1", m.getSessionId());
                Check.equal("message body", "in session s-1", m.getBody().toString());
                r.setSessionState(state);
                byte[] got = r.getSessionState();
                Check.that(Arrays.equals(state, got), "session state read back: " + Check.show(got));
                OffsetDateTime until = r.renewSessionLock();
                Check.that(until != null && until.toInstant().isAfter(Instant.now()),
                    "renewSessionLock returned " + until);
                r.complete(m);
                // The session holds only its own messages: s-2's message does not come here.
                Messaging.expectNoMessage(r, "a message of another session came to session s-1");
            }
            // The state outlives the receiver and its connection: a new lock on the session, from
            // another connection, reads it back. (Not this connection: the SDK names a session's
            // link after the session id and may hand back the link it is still closing, whose
            // lock is gone, instead of attaching a new one.)
            try (ServiceBusSessionReceiverClient again = sessionReceiver(env.client(), q);
                 ServiceBusReceiverClient r = acceptWhenReleased(again, "s-1")) {
                byte[] got = r.getSessionState();
                Check.that(Arrays.equals(state, got), "session state after reopening: " + Check.show(got));
                r.setSessionState(null);
                Check.equal("state after clearing", null, r.getSessionState());
            }
            try (ServiceBusReceiverClient r = sessions.acceptSession("s-2")) {
                ServiceBusReceivedMessage m = Env.receiveOne(r, Env.RECEIVE_WAIT, "the message of session s-2");
                Check.equal("message session id", "s-2", m.getSessionId());
                Check.equal("state of session s-2", null, r.getSessionState());
                r.complete(m);
            }
        }
    }

    /**
     * Accepts a session that a receiver of this program just closed. ServiceBusReceiverClient.close()
     * sends the detach and returns without waiting for the broker's answer, so the lock may still
     * be held for a moment: the broker refuses with com.microsoft:session-cannot-be-locked, and an
     * application tries again. Any other error, or the lock still held after 10 s, fails.
     */
    static ServiceBusReceiverClient acceptWhenReleased(ServiceBusSessionReceiverClient sessions, String id)
        throws InterruptedException {
        Instant deadline = Instant.now().plusSeconds(10);
        while (true) {
            try {
                return sessions.acceptSession(id);
            } catch (RuntimeException e) {
                if (!sessionLocked(e) || Instant.now().isAfter(deadline)) {
                    throw e;
                }
                Thread.sleep(100);
            }
        }
    }

    static boolean sessionLocked(Throwable e) {
        if (e instanceof com.azure.messaging.servicebus.ServiceBusException sbe
            && sbe.getReason() == com.azure.messaging.servicebus.ServiceBusFailureReason.SESSION_CANNOT_BE_LOCKED) {
            return true;
        }
        return e instanceof com.azure.core.amqp.exception.AmqpException ae
            && ae.getErrorCondition() == com.azure.core.amqp.exception.AmqpErrorCondition.SESSION_CANNOT_BE_LOCKED;
    }

    /**
     * The session "" is a session like any other. The SDK refuses acceptSession("") on the client
     * (IllegalArgumentException "'sessionId' cannot be empty"), so the application reaches it with
     * acceptNextSession: the queue holds only that session, and the receiver must learn the id ""
     * from the broker's attach.
     */
    static void sessionEmptyId(Env env) throws Exception {
        String q = env.entity("SESSION_EMPTY");
        ServiceBusClientBuilder b = env.client();
        byte[] state = {1, 2, 3};
        try (ServiceBusSenderClient s = b.sender().queueName(q).buildClient();
             ServiceBusSessionReceiverClient sessions = sessionReceiver(b, q)) {
            s.sendMessage(new ServiceBusMessage("in session \"\"").setMessageId("empty-session-1").setSessionId(""));
            try (ServiceBusReceiverClient r = sessions.acceptNextSession()) {
                Check.sameTyped("the next session's id", "", r.getSessionId());
                ServiceBusReceivedMessage m = Env.receiveOne(r, Env.RECEIVE_WAIT, "the message of session \"\"");
                Check.equal("message id", "empty-session-1", m.getMessageId());
                Check.sameTyped("message session id", "", m.getSessionId());
                step("complete in session \"\"", () -> r.complete(m));
                // 7.17.19 refuses its own session-state calls for the session "" on the client
                // (IllegalArgumentException "'sessionId' cannot be blank", nothing sent); any other
                // failure is the broker's.
                try {
                    r.setSessionState(state);
                    Check.that(Arrays.equals(state, r.getSessionState()), "state of session \"\" not read back");
                } catch (RuntimeException e) {
                    Throwable root = e;
                    while (root.getCause() != null) {
                        root = root.getCause();
                    }
                    if (!(root instanceof IllegalArgumentException) || !String.valueOf(root.getMessage()).contains("cannot be blank")) {
                        throw new RuntimeException("session state of \"\": " + e, e);
                    }
                }
            }
        }
    }

    /** step runs one operation of a scenario, naming it in the failure it may raise. */
    static void step(String what, Runnable op) {
        try {
            op.run();
        } catch (RuntimeException e) {
            throw new RuntimeException(what + ": " + e, e);
        }
    }
}
