package sbgate.compat;

import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import com.azure.messaging.servicebus.ServiceBusTransactionContext;
import com.azure.messaging.servicebus.models.CompleteOptions;

import java.time.Duration;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.util.List;

/**
 * Transactions (ServiceBusTransactionContext): the receive-process-send pattern, its sends and
 * its completion atomic, committed and rolled back; across entities with the builder's
 * cross-entity transactions (send-via).
 */
final class Transactions {
    private Transactions() {
    }

    /** Receives the message sent with id, peek-locked. */
    private static ServiceBusReceivedMessage take(ServiceBusSenderClient s, ServiceBusReceiverClient r, String id) {
        s.sendMessage(new ServiceBusMessage("work " + id).setMessageId(id));
        return Env.receiveOne(r, Env.RECEIVE_WAIT, id);
    }

    /** Complete the received message and send a result in one transaction, and commit. */
    static void commit(Env env) throws Exception {
        String q = env.entity("TXN");
        ServiceBusClientBuilder b = env.client();
        try (ServiceBusSenderClient s = Messaging.queueSender(b, q); ServiceBusReceiverClient r = Messaging.peekLockReceiver(b, q)) {
            ServiceBusReceivedMessage work = take(s, r, "txn-work-1");
            ServiceBusTransactionContext tx = s.createTransaction();
            s.sendMessage(new ServiceBusMessage("result").setMessageId("txn-result-1"), tx);
            long later = s.scheduleMessage(new ServiceBusMessage("later").setMessageId("txn-later-1"),
                OffsetDateTime.now().plusHours(1), tx);
            r.complete(work, new CompleteOptions().setTransactionContext(tx));
            Check.equal("what a peek finds before the commit", "txn-work-1", r.peekMessage().getMessageId());
            s.commitTransaction(tx);
            // The message scheduled in the transaction is known by the number its reply gave.
            s.cancelScheduledMessage(later);
            ServiceBusReceivedMessage result = Env.receiveOne(r, Env.RECEIVE_WAIT, "txn-result-1");
            Check.equal("the message sent in the transaction", "txn-result-1", result.getMessageId());
            r.complete(result);
            Messaging.expectNoMessage(r, "the message completed in the transaction came again");
        }
    }

    /** The same work rolled back: nothing is sent and the received message stays locked. */
    static void rollback(Env env) throws Exception {
        String q = env.entity("TXN_ROLLBACK");
        ServiceBusClientBuilder b = env.client();
        try (ServiceBusSenderClient s = Messaging.queueSender(b, q); ServiceBusReceiverClient r = Messaging.peekLockReceiver(b, q)) {
            ServiceBusReceivedMessage work = take(s, r, "txn-work-2");
            ServiceBusTransactionContext tx = s.createTransaction();
            s.sendMessage(new ServiceBusMessage("result").setMessageId("txn-result-2"), tx);
            r.complete(work, new CompleteOptions().setTransactionContext(tx));
            s.rollbackTransaction(tx);
            Messaging.expectNoMessage(r, "after the rollback");
            List<ServiceBusReceivedMessage> left = r.peekMessages(10).stream().toList();
            Check.equal("messages after the rollback", 1, left.size());
            Check.equal("the message after the rollback", "txn-work-2", left.get(0).getMessageId());
        }
    }

    /**
     * Cross-entity: one connection for every client of the builder, the first entity used the
     * one the others are sent via; receive from one queue, send to another, one transaction.
     */
    static void crossEntity(Env env) throws Exception {
        String in = env.entity("TXN_IN"), out = env.entity("TXN_OUT");
        ServiceBusClientBuilder b = env.client().enableCrossEntityTransactions();
        try (ServiceBusReceiverClient r = Messaging.peekLockReceiver(b, in);
             ServiceBusSenderClient feed = Messaging.queueSender(b, in);
             ServiceBusSenderClient s = Messaging.queueSender(b, out)) {
            ServiceBusReceivedMessage work = take(feed, r, "txn-work-3");
            ServiceBusTransactionContext tx = s.createTransaction();
            r.complete(work, new CompleteOptions().setTransactionContext(tx));
            s.sendMessage(new ServiceBusMessage("result").setMessageId("txn-result-3"), tx);
            s.commitTransaction(tx);
            // The same work rolled back: nothing reaches the other queue.
            ServiceBusReceivedMessage kept = take(feed, r, "txn-work-5");
            ServiceBusTransactionContext undone = s.createTransaction();
            r.complete(kept, new CompleteOptions().setTransactionContext(undone));
            s.sendMessage(new ServiceBusMessage("result").setMessageId("txn-result-5"), undone);
            s.rollbackTransaction(undone);
        }
        ServiceBusClientBuilder check = env.client();
        try (ServiceBusReceiverClient ro = Messaging.peekLockReceiver(check, out); ServiceBusReceiverClient ri = Messaging.peekLockReceiver(check, in)) {
            ServiceBusReceivedMessage result = Env.receiveOne(ro, Env.RECEIVE_WAIT, "txn-result-3");
            Check.equal("the message sent to the other queue", "txn-result-3", result.getMessageId());
            ro.complete(result);
            Messaging.expectNoMessage(ro, "a message sent in the rolled-back transaction arrived");
            List<ServiceBusReceivedMessage> left = ri.peekMessages(10).stream().toList();
            Check.equal("messages left in the first queue", 1, left.size());
            Check.equal("the message whose completion was rolled back", "txn-work-5", left.get(0).getMessageId());
        }
    }

    /**
     * A lock that lapses before the commit: the commit fails, nothing of the transaction is
     * applied, and the message comes back.
     */
    static void lockLapsed(Env env) throws Exception {
        String q = env.entity("TXN_LAPSE");
        ServiceBusClientBuilder b = env.client();
        try (ServiceBusSenderClient s = Messaging.queueSender(b, q); ServiceBusReceiverClient r = Messaging.peekLockReceiver(b, q)) {
            ServiceBusReceivedMessage work = take(s, r, "txn-work-4");
            ServiceBusTransactionContext tx = s.createTransaction();
            s.sendMessage(new ServiceBusMessage("result").setMessageId("txn-result-4"), tx);
            r.complete(work, new CompleteOptions().setTransactionContext(tx));
            // The condition waited for: the lock's end (5 s, the queue's lock duration) has passed.
            passed(work.getLockedUntil().toInstant().plusMillis(500));
            Check.throwsA(Exception.class, "commit after the lock lapsed", () -> s.commitTransaction(tx));
            ServiceBusReceivedMessage again = Env.receiveOne(r, Env.RECEIVE_WAIT, "txn-work-4");
            Check.equal("the message whose completion was rolled back", "txn-work-4", again.getMessageId());
            r.complete(again);
            Messaging.expectNoMessage(r, "the message sent in the failed transaction arrived");
        }
    }

    /**
     * A transaction not discharged in time (the test broker's timeout is 10 s) is rolled back:
     * its commit fails, and nothing it sent arrives. The Java SDK takes any outcome of a send in
     * a transaction as success, so the end of the timeout is waited for by the clock, from just
     * after the first operation (where the broker's timer starts).
     */
    static void timeout(Env env) throws Exception {
        String q = env.entity("TXN_TIMEOUT");
        ServiceBusClientBuilder b = env.client();
        try (ServiceBusSenderClient s = Messaging.queueSender(b, q); ServiceBusReceiverClient r = Messaging.peekLockReceiver(b, q)) {
            ServiceBusTransactionContext tx = s.createTransaction();
            s.sendMessage(new ServiceBusMessage("late").setMessageId("txn-late"), tx);
            passed(Instant.now().plusSeconds(TXN_TIMEOUT_SECONDS + 1));
            Check.throwsA(Exception.class, "commit after the timeout", () -> s.commitTransaction(tx));
            Messaging.expectNoMessage(r, "a message sent in the timed-out transaction arrived");
        }
    }

    /** The transaction timeout of the broker compat/java_test.go starts (javaTxnTimeout). */
    static final long TXN_TIMEOUT_SECONDS = 10;

    /** Returns once the clock has passed end: the condition a lapse or a timeout waits for. */
    private static void passed(Instant end) throws InterruptedException {
        while (Instant.now().isBefore(end)) {
            Thread.sleep(Math.max(1, Duration.between(Instant.now(), end).toMillis()));
        }
    }
}
