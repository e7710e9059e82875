"""The common client scenarios (compat/broker_test.go, commonScenarios) with azure-servicebus.

compat/python_test.go runs this one script with two Python stacks: Debian's azure-servicebus
7.8.2 over uAMQP, and the PyPI azure-servicebus pinned in requirements.txt over its pure-Python
AMQP. It uses the SDK's public API only, the way an application would, and prints one line per
scenario: "SCENARIO <name> PASS", "SCENARIO <name> FAIL <why>" or "SCENARIO <name> SKIP <why>".

Environment (set by the Go test):
  SB_SDK_VERSION       the azure-servicebus version this interpreter must have
  SB_CONN              data-plane connection string (key SendListen)
  SB_CONN_WRONG_KEY    the root key name with a wrong key
  SB_CONN_LISTEN_ONLY  key ListenOnly
  SB_ADMIN_CONN        https endpoint for ServiceBusAdministrationClient (root key)
  SB_WS_CONN           data-plane connection string naming the https listener (no emulator flag)
  SB_WS_ENDPOINT       sb://host:port of the https listener serving /$servicebus/websocket
  SB_CA_FILE           PEM of the test certificate (AMQPS, https, wss)
  SB_ENTITIES          JSON: scenario -> {"queue"|"topic"|"subscription": name}
  SB_SCENARIOS         optional comma-separated subset to run
  SB_DEBUG             "1": the SDK's frame logging (logging_enable) on stderr

Scenarios run concurrently, each with its own clients and entities, each bounded by
SCENARIO_TIMEOUT: one that hangs is reported FAIL and the others go on. Every receive has a
max_wait_time, so the script ends by itself.
"""

import datetime
import json
import logging
import os
import sys
import threading
import time
import traceback
import uuid

import azure.servicebus
from azure.servicebus import (
    NEXT_AVAILABLE_SESSION,
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusMessageState,
    ServiceBusReceiveMode,
    ServiceBusSubQueue,
    TransportType,
)
from azure.servicebus.amqp import AmqpAnnotatedMessage, AmqpMessageBodyType
from azure.servicebus.exceptions import (
    ServiceBusAuthenticationError,
    ServiceBusAuthorizationError,
)
from azure.servicebus.management import (
    CorrelationRuleFilter,
    ServiceBusAdministrationClient,
    SqlRuleAction,
    SqlRuleFilter,
    TrueRuleFilter,
)

SDK_VERSION = azure.servicebus.__version__
# 7.8 speaks AMQP through uAMQP (C); from 7.9 on the SDK uses its own pure-Python AMQP.
UAMQP = tuple(int(p) for p in SDK_VERSION.split(".")[:2]) < (7, 9)

SCENARIO_TIMEOUT = 60  # seconds for one scenario, well under the Go test's scenarioTimeout
PARALLEL = 6
SEND_TIMEOUT = 30  # seconds for one send, as an application bounds it

ENV = os.environ
CA_FILE = ENV.get("SB_CA_FILE")
DEBUG = ENV.get("SB_DEBUG") == "1"
ENTITIES = json.loads(ENV.get("SB_ENTITIES", "{}"))
UTC = datetime.timezone.utc

_print_lock = threading.Lock()


class _WarningsByThread(logging.Handler):
    """Keeps the SDK's last warnings per thread (each scenario runs in a thread named after it),
    so that a scenario stuck inside the SDK is reported with what the SDK said before it hung."""

    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.seen = {}
        self._mu = threading.Lock()  # not self.lock: logging.Handler holds that one around emit

    def emit(self, record):
        with self._mu:
            self.seen.setdefault(record.threadName, []).append(record.getMessage())
            del self.seen[record.threadName][:-2]

    def last(self, thread_name):
        with self._mu:
            return list(self.seen.get(thread_name, []))


SDK_WARNINGS = _WarningsByThread()


def report(name, verdict):
    line = "SCENARIO {} {}".format(name, " ".join(str(verdict).split()))
    with _print_lock:
        print(line, flush=True)


class Skip(Exception):
    """Raised by a scenario the SDK cannot express."""


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def equal(got, want, what):
    if got != want:
        raise AssertionError("{}: got {!r} ({}), want {!r} ({})".format(
            what, got, type(got).__name__, want, type(want).__name__))


def client(conn=None, **kwargs):
    """A ServiceBusClient as an application makes one: a connection string, and the CA of
    the test certificate for TLS (ignored on plain AMQP)."""
    return ServiceBusClient.from_connection_string(
        conn or ENV["SB_CONN"], connection_verify=CA_FILE, logging_enable=DEBUG, **kwargs)


def admin():
    # 7.15 passes connection_verify to its https transport; 7.8.2 drops every transport option
    # given to the constructor, and its requests session trusts REQUESTS_CA_BUNDLE instead.
    return ServiceBusAdministrationClient.from_connection_string(
        ENV["SB_ADMIN_CONN"], connection_verify=CA_FILE, logging_enable=DEBUG)


def receive(receiver, count, within=30):
    """Receives until count messages arrived or within seconds passed."""
    got = []
    deadline = time.monotonic() + within
    while len(got) < count and time.monotonic() < deadline:
        got += receiver.receive_messages(max_message_count=count - len(got), max_wait_time=3)
    return got


def receive_one(receiver, what, within=30):
    got = receive(receiver, 1, within)
    equal(len(got), 1, "messages received for " + what)
    return got[0]


def expect_nothing(receiver, what, wait=2):
    got = receiver.receive_messages(max_message_count=10, max_wait_time=wait)
    check(not got, "{}: got {} unexpected message(s): {}".format(
        what, len(got), [body_bytes(m) for m in got]))


def body_bytes(message):
    """The body of a message with data sections, as one bytes value."""
    return b"".join(bytes(b) for b in message.body)


def as_str(v):
    return v.decode("utf-8") if isinstance(v, (bytes, bytearray)) else v


def app_props(message):
    """Application properties by str key: both stacks hand received keys over as bytes."""
    return {as_str(k): v for k, v in (message.application_properties or {}).items()}


def utc(dt):
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def now():
    return datetime.datetime.now(UTC)


def names(scenario):
    return ENTITIES[scenario]


# ---------------------------------------------------------------------------------------------


def send_property_types(n):
    q = names(n)["queue"]
    stamp = datetime.datetime(2024, 2, 29, 13, 14, 15, 678000, tzinfo=UTC)
    uid = uuid.UUID("0f8fad5b-d9cb-469f-a165-70867728950e")
    # name -> (value sent, value and Python type the application reads back). Both AMQP stacks
    # hand a received AMQP string over as bytes (the SDK documents it for application
    # properties) and a timestamp as int milliseconds since the epoch; a uuid stays a UUID.
    props = {
        "string": ("héllo wörld", "héllo wörld".encode("utf-8")),
        "empty-string": ("", b""),
        "int": (-7, -7),
        "int32": (2000000000, 2000000000),
        "double": (2.5e-3, 2.5e-3),
        "true": (True, True),
        "false": (False, False),
        "uuid": (uid, uid),
        "timestamp": (stamp, 1709212455678),
        # Both stacks send a bytearray as AMQP binary (bytes go as an AMQP string).
        "binary": (bytearray(b"\x00\x01\xfe\xff"), b"\x00\x01\xfe\xff"),
    }
    if UAMQP:
        # uAMQP turns an int into AMQP int or long by its size, and offers a class per AMQP
        # integer type in uamqp.types (the transport this SDK version exposes).
        from uamqp import types as ut

        props.update({
            "long": (2 ** 40, 2 ** 40),
            "byte": (ut.AMQPByte(-5), -5),
            "ubyte": (ut.AMQPuByte(200), 200),
            "short": (ut.AMQPShort(-300), -300),
            "ushort": (ut.AMQPuShort(60000), 60000),
            "typed-int": (ut.AMQPInt(-70000), -70000),
            "uint": (ut.AMQPuInt(4000000000), 4000000000),
            "typed-long": (ut.AMQPLong(-(2 ** 40)), -(2 ** 40)),
            "ulong": (ut.AMQPuLong(2 ** 64 - 1), 2 ** 64 - 1),
            # No char: uamqp.types.AMQPChar in uAMQP 1.5.3 hands bytes to c_uamqp.char_value,
            # which takes a uint32, and raises TypeError before anything is sent.
        })
    # The pure-Python AMQP (7.15.0) encodes every int as AMQP int, 32 bits: it has no other
    # integer type for application properties. It sends a Decimal as decimal128 but cannot read
    # one back: its decoder ignores the exponent bias (Decimal("1.5") fails with
    # decimal.Overflow, 0 reads 0E+6111) and the message is then never handed to the
    # application, whatever the broker returns. So no decimal here.
    with client() as c:
        with c.get_queue_sender(q) as s:
            s.send_messages(ServiceBusMessage(b"typed", application_properties={k: v[0] for k, v in props.items()}), timeout=SEND_TIMEOUT)
        with c.get_queue_receiver(q) as r:
            m = receive_one(r, "the typed message")
            got = app_props(m)
            bad = []
            for k, (_, want) in props.items():
                if k not in got:
                    bad.append("{} missing".format(k))
                    continue
                v = got[k]
                if type(v) is not type(want) or v != want:
                    bad.append("{}: got {!r} ({}), want {!r} ({})".format(
                        k, v, type(v).__name__, want, type(want).__name__))
            extra = sorted(set(got) - set(props))
            if extra:
                bad.append("unexpected properties {}".format(extra))
            check(not bad, "; ".join(bad))
            r.complete_message(m)


def send_body_kinds(n):
    q = names(n)["queue"]
    sent = [
        ("one data section", ServiceBusMessage(b"\x00binary\xff"), AmqpMessageBodyType.DATA, [b"\x00binary\xff"]),
        ("string body", ServiceBusMessage("text ü"), AmqpMessageBodyType.DATA, ["text ü".encode("utf-8")]),
        ("three data sections", AmqpAnnotatedMessage(data_body=[b"one", b"two", b"three"]),
         AmqpMessageBodyType.DATA, [b"one", b"two", b"three"]),
        ("amqp-value int", AmqpAnnotatedMessage(value_body=42), AmqpMessageBodyType.VALUE, 42),
        ("amqp-value list", AmqpAnnotatedMessage(value_body=[1, 2.5, True, None]),
         AmqpMessageBodyType.VALUE, [1, 2.5, True, None]),
        ("amqp-sequence", AmqpAnnotatedMessage(sequence_body=[[1, 2], [3]]),
         AmqpMessageBodyType.SEQUENCE, [[1, 2], [3]]),
    ]
    with client() as c:
        with c.get_queue_sender(q) as s:
            for _, m, _, _ in sent:
                s.send_messages(m, timeout=SEND_TIMEOUT)
        with c.get_queue_receiver(q) as r:
            got = receive(r, len(sent))
            equal(len(got), len(sent), "messages received")
            bad = []
            for (what, _, kind, want), m in zip(sent, got):
                if m.body_type != kind:
                    bad.append("{}: body type {}, want {}".format(what, m.body_type, kind))
                    continue
                body = m.body
                if kind == AmqpMessageBodyType.DATA:
                    body = [bytes(b) for b in body]
                elif kind == AmqpMessageBodyType.SEQUENCE:
                    body = [list(x) for x in body]
                if body != want:
                    bad.append("{}: body {!r}, want {!r}".format(what, body, want))
            check(not bad, "; ".join(bad))
            for m in got:
                r.complete_message(m)


def receive_and_delete(n):
    q = names(n)["queue"]
    with client() as c:
        with c.get_queue_sender(q) as s:
            s.send_messages([ServiceBusMessage("rd-{}".format(i)) for i in range(3)], timeout=SEND_TIMEOUT)
        with c.get_queue_receiver(q, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as r:
            got = receive(r, 3)
            equal(sorted(body_bytes(m) for m in got), [b"rd-0", b"rd-1", b"rd-2"], "bodies")
            check(all(m.lock_token is None for m in got), "received-and-deleted messages carry no lock token")
        # A new receiver in peek-lock mode finds nothing: the messages are gone, not locked.
        with c.get_queue_receiver(q) as r:
            expect_nothing(r, "after receive-and-delete")
            equal(r.peek_messages(max_message_count=10), [], "peek after receive-and-delete")


def peek_lock_complete(n):
    q = names(n)["queue"]
    mid = "msg-" + uuid.uuid4().hex
    before = now() - datetime.timedelta(seconds=30)
    with client() as c:
        with c.get_queue_sender(q) as s:
            s.send_messages(ServiceBusMessage(
                b"peek-lock", message_id=mid, subject="the-subject", content_type="application/octet-stream",
                correlation_id="corr-1", to="someone", reply_to="reply-queue",
                time_to_live=datetime.timedelta(minutes=10)), timeout=SEND_TIMEOUT)
        with c.get_queue_receiver(q) as r:
            m = receive_one(r, "the message")
            equal(body_bytes(m), b"peek-lock", "body")
            equal(m.message_id, mid, "message_id")
            equal(m.subject, "the-subject", "subject")
            equal(m.content_type, "application/octet-stream", "content_type")
            equal(m.correlation_id, "corr-1", "correlation_id")
            equal(m.to, "someone", "to")
            equal(m.reply_to, "reply-queue", "reply_to")
            equal(m.time_to_live, datetime.timedelta(minutes=10), "time_to_live")
            equal(m.delivery_count, 0, "delivery_count of a first delivery (AMQP header {})".format(
                m.raw_amqp_message.header))
            check(isinstance(m.sequence_number, int) and m.sequence_number > 0,
                  "sequence_number {!r}".format(m.sequence_number))
            check(isinstance(m.enqueued_time_utc, datetime.datetime) and utc(m.enqueued_time_utc) > before,
                  "enqueued_time_utc {!r}".format(m.enqueued_time_utc))
            check(utc(m.locked_until_utc) > now(), "locked_until_utc {!r} in the future".format(m.locked_until_utc))
            uuid.UUID(str(m.lock_token))
            r.complete_message(m)
            expect_nothing(r, "after complete")


def abandon_with_properties(n):
    # The SDK cannot send properties to modify; plain abandon is still checked so that a
    # broken abandon fails here instead of hiding behind the skip.
    q = names(n)["queue"]
    with client() as c:
        with c.get_queue_sender(q) as s:
            s.send_messages(ServiceBusMessage(b"abandon", message_id="abandon-1"), timeout=SEND_TIMEOUT)
        with c.get_queue_receiver(q) as r:
            m = receive_one(r, "the message")
            r.abandon_message(m)
            m2 = receive_one(r, "the abandoned message again")
            equal(m2.message_id, "abandon-1", "message_id of the redelivery")
            equal(m2.delivery_count, 1, "delivery_count after one abandon")
            equal(m2.sequence_number, m.sequence_number, "sequence_number of the redelivery")
            r.complete_message(m2)
    raise Skip("azure-servicebus {}: abandon_message(message) takes no properties to modify "
               "(plain abandon checked: redelivered with delivery_count 1)".format(SDK_VERSION))


def defer_receive_deferred(n):
    q = names(n)["queue"]
    with client() as c:
        with c.get_queue_sender(q) as s:
            s.send_messages(ServiceBusMessage(b"deferred", message_id="defer-1"), timeout=SEND_TIMEOUT)
        with c.get_queue_receiver(q) as r:
            m = receive_one(r, "the message")
            seq = m.sequence_number
            r.defer_message(m)
            expect_nothing(r, "a deferred message is not received again")
            deferred = r.receive_deferred_messages([seq])
            equal(len(deferred), 1, "deferred messages received by sequence number")
            d = deferred[0]
            equal(d.sequence_number, seq, "sequence_number")
            equal(d.message_id, "defer-1", "message_id")
            equal(body_bytes(d), b"deferred", "body")
            equal(d.state, ServiceBusMessageState.DEFERRED, "state")
            r.complete_message(d)
            equal(r.peek_messages(max_message_count=10), [], "peek after completing the deferred message")


def dead_letter_reason(n):
    q = names(n)["queue"]
    with client() as c:
        with c.get_queue_sender(q) as s:
            s.send_messages(ServiceBusMessage(b"to the dlq", message_id="dlq-1"), timeout=SEND_TIMEOUT)
        with c.get_queue_receiver(q) as r:
            m = receive_one(r, "the message")
            r.dead_letter_message(m, reason="BadOrder", error_description="the price is missing")
            expect_nothing(r, "the dead-lettered message is not in the queue")
        with c.get_queue_receiver(q, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dr:
            d = receive_one(dr, "the dead-lettered message")
            equal(d.message_id, "dlq-1", "message_id")
            equal(body_bytes(d), b"to the dlq", "body")
            equal(d.dead_letter_reason, "BadOrder", "dead_letter_reason")
            equal(d.dead_letter_error_description, "the price is missing", "dead_letter_error_description")
            dr.complete_message(d)


def renew_lock(n):
    # The queue's lock lasts 10 s: the message is renewed every second until well past its
    # first lock, then completed, which only works if the renewals held the lock.
    q = names(n)["queue"]
    with client() as c:
        with c.get_queue_sender(q) as s:
            s.send_messages(ServiceBusMessage(b"renew"), timeout=SEND_TIMEOUT)
        with c.get_queue_receiver(q) as r:
            m = receive_one(r, "the message")
            first = utc(m.locked_until_utc)
            last = first
            while now() < first + datetime.timedelta(seconds=2):
                until = r.renew_message_lock(m)
                check(isinstance(until, datetime.datetime), "renew_message_lock returned {!r}".format(until))
                until = utc(until)
                check(until >= last, "renewed lock {} is before the previous {}".format(until, last))
                equal(utc(m.locked_until_utc), until, "message.locked_until_utc after renewal")
                last = until
                time.sleep(1)
            check(last > first + datetime.timedelta(seconds=1),
                  "the renewed lock {} is not later than the first {}".format(last, first))
            r.complete_message(m)
            expect_nothing(r, "after completing the renewed message")


def peek(n):
    q = names(n)["queue"]
    with client() as c:
        with c.get_queue_receiver(q) as r:
            equal(r.peek_messages(max_message_count=5), [], "peek of an empty queue")
        with c.get_queue_sender(q) as s:
            for i in range(3):
                s.send_messages(ServiceBusMessage("peek-{}".format(i)), timeout=SEND_TIMEOUT)
        with c.get_queue_receiver(q) as r:
            seen = r.peek_messages(max_message_count=10)
            equal([body_bytes(m) for m in seen], [b"peek-0", b"peek-1", b"peek-2"], "peeked bodies")
            seqs = [m.sequence_number for m in seen]
            check(seqs == sorted(seqs) and len(set(seqs)) == 3, "peeked sequence numbers {}".format(seqs))
            from_second = r.peek_messages(max_message_count=10, sequence_number=seqs[1])
            equal([m.sequence_number for m in from_second], seqs[1:], "peek from the second sequence number")
            check(all(m.lock_token is None for m in seen), "peeked messages carry no lock")
            # Peeking locked nothing: all three are received at their first delivery.
            got = receive(r, 3)
            equal(sorted(body_bytes(m) for m in got), [b"peek-0", b"peek-1", b"peek-2"], "received bodies")
            equal([m.delivery_count for m in got], [0, 0, 0], "delivery counts after peeking")
            for m in got:
                r.complete_message(m)


def schedule_cancel(sender, receiver_of, same_entity):
    """Schedules two messages, cancels the first and receives the second. same_entity: the
    receiver reads the entity scheduled on (a queue), whose sequence numbers are the ones
    schedule_messages returned and whose peek shows them; a subscription numbers its copies
    itself and shows none before their time."""
    # Far enough ahead that the peek below still finds the message scheduled on a slow machine.
    at = now() + datetime.timedelta(seconds=8)
    at = at.replace(microsecond=(at.microsecond // 1000) * 1000)
    with sender as s:
        seqs = s.schedule_messages(
            [ServiceBusMessage(b"cancelled", message_id="sched-1"), ServiceBusMessage(b"kept", message_id="sched-2")], at)
        check(isinstance(seqs, list) and len(seqs) == 2 and all(isinstance(x, int) for x in seqs),
              "schedule_messages returned {!r}".format(seqs))
        s.cancel_scheduled_messages(seqs[0])
    with receiver_of() as r:
        peeked = r.peek_messages(max_message_count=10)
        if same_entity:
            equal([m.message_id for m in peeked], ["sched-2"], "peek shows the one scheduled message left")
            equal(peeked[0].state, ServiceBusMessageState.SCHEDULED, "state of the peeked scheduled message")
            equal(utc(peeked[0].scheduled_enqueue_time_utc), at, "scheduled_enqueue_time_utc of the peeked message")
            equal(peeked[0].sequence_number, seqs[1], "sequence_number of the peeked message")
        else:
            # A message scheduled on a topic waits in the topic: a subscription's peek does not
            # show it before its time ("Message browsing": scheduled messages are peeked on
            # queues, not on subscriptions).
            equal([m.message_id for m in peeked], [], "a subscription's peek before the scheduled time")
        m = receive_one(r, "the scheduled message", within=40)
        arrived = now()
        equal(m.message_id, "sched-2", "message_id of the message received")
        equal(body_bytes(m), b"kept", "body of the message received")
        if same_entity:
            equal(m.sequence_number, seqs[1], "sequence_number")
        equal(utc(m.scheduled_enqueue_time_utc), at, "scheduled_enqueue_time_utc")
        check(arrived >= at - datetime.timedelta(seconds=1),
              "received at {} before its scheduled time {}".format(arrived, at))
        r.complete_message(m)
        expect_nothing(r, "the cancelled message")


def schedule_cancel_queue(n):
    q = names(n)["queue"]
    with client() as c:
        schedule_cancel(c.get_queue_sender(q), lambda: c.get_queue_receiver(q), True)


def schedule_cancel_topic(n):
    t, sub = names(n)["topic"], names(n)["subscription"]
    with client() as c:
        schedule_cancel(c.get_topic_sender(t), lambda: c.get_subscription_receiver(t, sub), False)


def session_state(n):
    q = names(n)["queue"]
    with client() as c:
        with c.get_queue_sender(q) as s:
            s.send_messages([ServiceBusMessage("s1-{}".format(i), session_id="s-1") for i in range(2)], timeout=SEND_TIMEOUT)
            s.send_messages(ServiceBusMessage("s2", session_id="s-2"), timeout=SEND_TIMEOUT)
        with c.get_queue_receiver(q, session_id="s-1") as r:
            sess = r.session
            equal(sess.session_id, "s-1", "session_id")
            check(utc(sess.locked_until_utc) > now(), "session locked_until_utc {!r}".format(sess.locked_until_utc))
            equal(sess.get_state(), None, "state of a new session")
            sess.set_state(b"\x00state-1")
            equal(sess.get_state(), b"\x00state-1", "state after set_state")
            sess.set_state("text state")
            equal(sess.get_state(), b"text state", "state after set_state of a str")
            until = sess.renew_lock()
            check(isinstance(until, datetime.datetime) and utc(until) > now(), "renew_lock returned {!r}".format(until))
            got = receive(r, 2)
            equal([body_bytes(m) for m in got], [b"s1-0", b"s1-1"], "bodies of session s-1, in order")
            equal([m.session_id for m in got], ["s-1", "s-1"], "session_id of the messages")
            for m in got:
                r.complete_message(m)
            expect_nothing(r, "session s-1 after its two messages")
        # The state outlives the receiver.
        with c.get_queue_receiver(q, session_id="s-1") as r:
            equal(r.session.get_state(), b"text state", "state seen by the next receiver of the session")
            r.session.set_state(None)
            equal(r.session.get_state(), None, "state after set_state(None)")
        # The next available session is the one with messages left.
        with c.get_queue_receiver(q, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=10) as r:
            m = receive_one(r, "the message of the next available session")
            equal(r.session.session_id, "s-2", "session id of the next available session")
            equal(m.session_id, "s-2", "session_id of its message")
            r.complete_message(m)


def session_empty_id(n):
    q = names(n)["queue"]
    with client() as c:
        with c.get_queue_sender(q) as s:
            s.send_messages(ServiceBusMessage(b"other", session_id="other"), timeout=SEND_TIMEOUT)
            s.send_messages(ServiceBusMessage(b"empty", session_id=""), timeout=SEND_TIMEOUT)
        with c.get_queue_receiver(q, session_id="") as r:
            equal(r.session.session_id, "", "session_id of the receiver")
            m = receive_one(r, "the message of session \"\"")
            equal(body_bytes(m), b"empty", "body")
            equal(m.session_id, "", "session_id of the message")
            r.session.set_state(b"empty-state")
            equal(r.session.get_state(), b"empty-state", "state of session \"\"")
            r.complete_message(m)
            expect_nothing(r, "session \"\" after its message")
        with c.get_queue_receiver(q, session_id="other") as r:
            m = receive_one(r, "the message of session other")
            equal(body_bytes(m), b"other", "body of session other")
            equal(r.session.get_state(), None, "state of session other")
            r.complete_message(m)


def list_sessions(n):
    q = names(n)["queue"]
    with client() as c:
        if not hasattr(c, "list_queue_sessions"):
            raise Skip("azure-servicebus {} has no API to list sessions "
                       "(ServiceBusClient.list_queue_sessions came later)".format(SDK_VERSION))
        equal(list(c.list_queue_sessions(q)), [], "sessions of an empty queue")
        with c.get_queue_sender(q) as s:
            s.send_messages([ServiceBusMessage(b"a", session_id="a"), ServiceBusMessage(b"b", session_id="b"),
                             ServiceBusMessage(b"c", session_id="c")], timeout=SEND_TIMEOUT)
        # Session c keeps only its state: listed for the state, not for messages.
        with c.get_queue_receiver(q, session_id="c") as r:
            r.session.set_state(b"c-state")
            r.complete_message(receive_one(r, "the message of session c"))
        equal(sorted(c.list_queue_sessions(q)), ["a", "b", "c"], "sessions listed")
        since = now()
        with c.get_queue_receiver(q, session_id="b") as r:
            r.session.set_state(b"b-state")
        equal(sorted(c.list_queue_sessions(q, state_updated_after=since - datetime.timedelta(seconds=1))),
              ["b"], "sessions whose state changed since")


def rules(n):
    t, sub = names(n)["topic"], names(n)["subscription"]
    with admin() as a:
        a.create_subscription(t, sub)
        listed = list(a.list_rules(t, sub))
        equal([r.name for r in listed], ["$Default"], "rules of a new subscription")
        check(isinstance(listed[0].filter, TrueRuleFilter), "$Default filter {!r}".format(listed[0].filter))
        a.delete_rule(t, sub, "$Default")
        a.create_rule(t, sub, "red", filter=SqlRuleFilter("color = 'red'"), action=SqlRuleAction("SET routed = 'red'"))
        a.create_rule(t, sub, "order", filter=CorrelationRuleFilter(correlation_id="order-1", properties={"kind": "order"}))
        got = {r.name: r for r in a.list_rules(t, sub)}
        equal(sorted(got), ["order", "red"], "rule names")
        check(isinstance(got["red"].filter, SqlRuleFilter), "red filter {!r}".format(got["red"].filter))
        equal(got["red"].filter.sql_expression, "color = 'red'", "red filter expression")
        check(isinstance(got["red"].action, SqlRuleAction), "red action {!r}".format(got["red"].action))
        equal(got["red"].action.sql_expression, "SET routed = 'red'", "red action expression")
        check(isinstance(got["order"].filter, CorrelationRuleFilter), "order filter {!r}".format(got["order"].filter))
        equal(got["order"].filter.correlation_id, "order-1", "order filter correlation_id")
        equal(dict(got["order"].filter.properties), {"kind": "order"}, "order filter properties")
        # The rules decide what the subscription receives.
        with client() as c:
            with c.get_topic_sender(t) as s:
                s.send_messages([
                    ServiceBusMessage(b"red", application_properties={"color": "red"}),
                    ServiceBusMessage(b"blue", application_properties={"color": "blue"}),
                    ServiceBusMessage(b"order", correlation_id="order-1", application_properties={"kind": "order"}),
                    ServiceBusMessage(b"not-order", correlation_id="order-2", application_properties={"kind": "order"}),
                ], timeout=SEND_TIMEOUT)
            with c.get_subscription_receiver(t, sub) as r:
                got_msgs = receive(r, 2)
                equal(sorted(body_bytes(m) for m in got_msgs), [b"order", b"red"], "messages the rules let through")
                red = [m for m in got_msgs if body_bytes(m) == b"red"][0]
                equal(as_str(app_props(red).get("routed")), "red", "property set by the red rule's action")
                for m in got_msgs:
                    r.complete_message(m)
                expect_nothing(r, "messages no rule matches")
        a.delete_rule(t, sub, "order")
        equal([r.name for r in a.list_rules(t, sub)], ["red"], "rules after deleting one")


def batch(n):
    q = names(n)["queue"]
    with client() as c:
        with c.get_queue_sender(q) as s:
            b = s.create_message_batch()
            check(b.max_size_in_bytes > 0, "batch max_size_in_bytes {}".format(b.max_size_in_bytes))
            for i in range(10):
                b.add_message(ServiceBusMessage("batch-{}".format(i), application_properties={"i": i}))
            equal(len(b), 10, "messages in the batch")
            s.send_messages(b, timeout=SEND_TIMEOUT)
            s.send_messages([ServiceBusMessage("list-{}".format(i)) for i in range(3)], timeout=SEND_TIMEOUT)
        with c.get_queue_receiver(q) as r:
            got = receive(r, 13)
            want = sorted(["batch-{}".format(i).encode() for i in range(10)] + ["list-{}".format(i).encode() for i in range(3)])
            equal(sorted(body_bytes(m) for m in got), want, "bodies received")
            for m in got:
                if body_bytes(m).startswith(b"batch-"):
                    equal(app_props(m).get("i"), int(body_bytes(m)[6:]), "property i of " + body_bytes(m).decode())
                r.complete_message(m)
            expect_nothing(r, "after the batch")


def large_message(n):
    q = names(n)["queue"]
    body = os.urandom(200 * 1024)
    with client() as c:
        with c.get_queue_sender(q) as s:
            s.send_messages(ServiceBusMessage(body, message_id="large"), timeout=SEND_TIMEOUT)
        with c.get_queue_receiver(q) as r:
            m = receive_one(r, "the large message")
            got = body_bytes(m)
            equal(len(got), len(body), "body length")
            check(got == body, "the body differs from what was sent")
            r.complete_message(m)


def websockets(n):
    q = names(n)["queue"]
    # A connection string for the https listener (TLS, as on Azure), whose address is the
    # custom endpoint the SDK dials for wss://host:port/$servicebus/websocket.
    with client(ENV["SB_WS_CONN"], transport_type=TransportType.AmqpOverWebsocket, custom_endpoint_address=ENV["SB_WS_ENDPOINT"]) as c:
        with c.get_queue_sender(q) as s:
            s.send_messages(ServiceBusMessage(b"over websockets", message_id="ws-1"), timeout=SEND_TIMEOUT)
        with c.get_queue_receiver(q) as r:
            m = receive_one(r, "the message over websockets")
            equal(m.message_id, "ws-1", "message_id")
            equal(body_bytes(m), b"over websockets", "body")
            r.complete_message(m)


def expect_error(kind, fn, what):
    try:
        fn()
    except kind:
        return
    except Exception as e:  # noqa: BLE001 - the scenario reports which error it was
        raise AssertionError("{}: raised {}: {}, want {}".format(what, type(e).__name__, e, kind.__name__)) from e
    raise AssertionError("{}: no error, want {}".format(what, kind.__name__))


def send_one(conn, queue):
    with client(conn) as c:
        with c.get_queue_sender(queue) as s:
            s.send_messages(ServiceBusMessage(b"refused"), timeout=SEND_TIMEOUT)


def wrong_key(n):
    q = names(n)["queue"]
    expect_error(ServiceBusAuthenticationError, lambda: send_one(ENV["SB_CONN_WRONG_KEY"], q), "send with a wrong key")


def missing_right(n):
    q = names(n)["queue"]
    # Listen is enough to receive; sending needs Send.
    with client(ENV["SB_CONN_LISTEN_ONLY"]) as c:
        with c.get_queue_receiver(q) as r:
            equal(r.receive_messages(max_message_count=1, max_wait_time=1), [], "receive with a Listen-only key")
    expect_error(ServiceBusAuthorizationError, lambda: send_one(ENV["SB_CONN_LISTEN_ONLY"], q),
                 "send with a Listen-only key")


def missing_entity(n):
    # The service refuses the token for an entity that does not exist: the SDK's own tests
    # (test_sb_client_bad_entity) expect ServiceBusAuthenticationError.
    q = names(n)["queue"]
    expect_error(ServiceBusAuthenticationError, lambda: send_one(ENV["SB_CONN"], q), "send to a missing queue")


SCENARIOS = {
    "send-property-types": send_property_types,
    "send-body-kinds": send_body_kinds,
    "receive-and-delete": receive_and_delete,
    "peek-lock-complete": peek_lock_complete,
    "abandon-with-properties": abandon_with_properties,
    "defer-receive-deferred": defer_receive_deferred,
    "dead-letter-reason": dead_letter_reason,
    "renew-lock": renew_lock,
    "peek": peek,
    "schedule-cancel-queue": schedule_cancel_queue,
    "schedule-cancel-topic": schedule_cancel_topic,
    "session-state": session_state,
    "session-empty-id": session_empty_id,
    "list-sessions": list_sessions,
    "rules": rules,
    "batch": batch,
    "large-message": large_message,
    "websockets": websockets,
    "wrong-key": wrong_key,
    "missing-right": missing_right,
    "missing-entity": missing_entity,
}


def run(name):
    try:
        SCENARIOS[name](name)
    except Skip as e:
        return "SKIP {}".format(e)
    except Exception as e:  # noqa: BLE001 - every failure is reported, and the others go on
        if DEBUG:
            traceback.print_exc()
        return "FAIL {}: {}".format(type(e).__name__, e)
    return "PASS"


def main():
    if ENV.get("SB_SDK_VERSION") and ENV["SB_SDK_VERSION"] != SDK_VERSION:
        print("azure-servicebus {} found, {} expected (run `make python-clients`)".format(
            SDK_VERSION, ENV["SB_SDK_VERSION"]), flush=True)
        return 2
    stack = "uamqp" if UAMQP else "pyamqp"
    print("STACK azure-servicebus {} over {} on Python {}".format(
        SDK_VERSION, stack, sys.version.split()[0]), flush=True)
    if DEBUG:
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr,
                            format="%(asctime)s %(threadName)s %(name)s %(message)s")
    for name in ("azure", "uamqp"):
        logger = logging.getLogger(name)
        logger.addHandler(SDK_WARNINGS)
        if not DEBUG:
            logger.setLevel(logging.WARNING)
            logger.propagate = False
    wanted = [s for s in ENV.get("SB_SCENARIOS", "").split(",") if s] or list(SCENARIOS)
    unknown = [s for s in wanted if s not in SCENARIOS]
    if unknown:
        print("unknown scenarios: {}".format(unknown), flush=True)
        return 2
    # At most PARALLEL scenarios at a time, each in a thread of its own. One stuck inside the
    # SDK cannot be interrupted: it is reported once its time is up, its slot goes to the next
    # scenario and its thread is left behind (os._exit below ends the process regardless).
    queue = list(wanted)
    running = {}  # name -> (thread, start time, result holder)
    while queue or running:
        while queue and len(running) < PARALLEL:
            name = queue.pop(0)
            holder = []
            th = threading.Thread(target=lambda n=name, h=holder: h.append(run(n)), name=name, daemon=True)
            th.start()
            running[name] = (th, time.monotonic(), holder)
        for name, (th, start, holder) in list(running.items()):
            th.join(timeout=0.1)
            if holder:
                report(name, holder[0])
                del running[name]
            elif time.monotonic() - start > SCENARIO_TIMEOUT:
                said = SDK_WARNINGS.last(name)
                report(name, "FAIL timed out after {} s{}".format(
                    SCENARIO_TIMEOUT, " (the SDK's last warnings: {})".format(" | ".join(said)) if said else ""))
                del running[name]
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
