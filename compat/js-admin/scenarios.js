// The common client scenarios (compat/broker_test.go, commonScenarios) with the official
// @azure/service-bus ServiceBusClient (the version pinned in package.json), run by
// compat/js_scenarios_test.go. It uses the SDK's public API only, the way an application does,
// and prints one line per scenario: "SCENARIO <name> PASS", "SCENARIO <name> FAIL <why>" or
// "SCENARIO <name> SKIP <why>".
//
// Environment (set by the Go test):
//   SB_CONN              data-plane connection string, key SendListen, UseDevelopmentEmulator=true
//   SB_CONN_ROOT         the same with the root key (rule operations need Manage)
//   SB_CONN_WRONG_KEY    the SendListen key name with another key's secret
//   SB_CONN_LISTEN_ONLY  key ListenOnly
//   SB_WS_CONN           connection string naming the https listener (no emulator flag)
//   SB_CA_FILE           PEM of the test certificate (wss)
//   SB_ENTITIES          JSON: scenario -> {"queue"|"topic"|"subscription": name}
//   SB_SCENARIOS         optional comma-separated subset to run
//   DEBUG                azure*,rhea* for the SDK's and rhea's log on stderr
//
// Scenarios run concurrently (PARALLEL at a time), each with its own client and entities, each
// bounded by SCENARIO_TIMEOUT_MS: one that hangs is reported FAIL and the others go on. Every
// receive has a maxWaitTimeInMs, and the process exits when the last scenario is reported.
'use strict';
const assert = require('assert');
const crypto = require('crypto');
const fs = require('fs');
const WebSocket = require('ws');
const { ServiceBusClient, isServiceBusError } = require('@azure/service-bus');
const SDK_VERSION = require('@azure/service-bus/package.json').version;

const SCENARIO_TIMEOUT_MS = 90000;
const PARALLEL = 6;
const RECEIVE_WAIT_MS = 30000;
const ABSENCE_WAIT_MS = 2000;

const ENV = process.env;
const ENTITIES = JSON.parse(ENV.SB_ENTITIES || '{}');

class Skip extends Error {}

// Peek-lock receivers settle only what the scenario settles and renew nothing by themselves.
const PEEK_LOCK = { maxAutoLockRenewalDurationInMs: 0 };

function show(v) {
  if (Buffer.isBuffer(v)) return `Buffer<${v.toString('hex')}>`;
  if (v instanceof Date) return `Date(${v.toISOString()})`;
  if (v !== null && typeof v === 'object' && typeof v.toString === 'function' && v.constructor && v.constructor.name === 'Long') {
    return `Long(${v.toString()})`;
  }
  try {
    return `${JSON.stringify(v)} (${v === null ? 'null' : typeof v})`;
  } catch {
    return String(v);
  }
}

// Problems collects mismatches so that a scenario reports all of them at once.
class Problems {
  constructor() {
    this.list = [];
  }
  add(what) {
    this.list.push(what);
  }
  equal(what, got, want) {
    try {
      assert.deepStrictEqual(got, want);
    } catch {
      this.add(`${what}: got ${show(got)}, want ${show(want)}`);
    }
  }
  check(cond, what) {
    if (!cond) this.add(what);
  }
  async attempt(what, fn) {
    try {
      return await fn();
    } catch (e) {
      this.add(`${what}: ${describe(e)}`);
      return undefined;
    }
  }
  verify() {
    if (this.list.length) throw new Error(this.list.join('; '));
  }
}

function describe(e) {
  if (isServiceBusError(e)) return `ServiceBusError ${e.code}: ${e.message}`;
  return `${e && e.name}: ${e && e.message}`;
}

// Scenario is one scenario's run: its entities and what to close at its end.
class Scenario {
  constructor(name) {
    this.name = name;
    this.entities = ENTITIES[name] || {};
    this.closers = [];
  }
  client(conn = ENV.SB_CONN, options = {}) {
    const c = new ServiceBusClient(conn, { retryOptions: { maxRetries: 1, timeoutInMs: 30000 }, ...options });
    this.closers.push(() => c.close());
    return c;
  }
  async end() {
    for (const close of this.closers.reverse()) {
      await close().catch(() => {});
    }
  }
}

// receive receives until n messages arrived or withinMs passed.
async function receive(receiver, n, withinMs = RECEIVE_WAIT_MS) {
  const got = [];
  const deadline = Date.now() + withinMs;
  while (got.length < n && Date.now() < deadline) {
    const wait = Math.max(1, Math.min(3000, deadline - Date.now()));
    got.push(...(await receiver.receiveMessages(n - got.length, { maxWaitTimeInMs: wait })));
  }
  return got;
}

async function receiveOne(receiver, what, withinMs) {
  const got = await receive(receiver, 1, withinMs);
  if (got.length !== 1) throw new Error(`${what}: ${got.length} messages received, want 1`);
  return got[0];
}

async function expectNothing(receiver, what) {
  const got = await receiver.receiveMessages(10, { maxWaitTimeInMs: ABSENCE_WAIT_MS });
  if (got.length) {
    throw new Error(`${what}: ${got.length} unexpected message(s): ${got.map((m) => show(m.body)).join(', ')}`);
  }
}

function bodyText(m) {
  return Buffer.isBuffer(m.body) ? m.body.toString('utf8') : String(m.body);
}

function seqString(s) {
  return s === undefined || s === null ? String(s) : s.toString();
}

// ---- scenarios ------------------------------------------------------------------------------

// Every application property type the SDK sends: its declared types are number, boolean, string,
// Date and null, and rhea encodes a number by its value: a negative integer as int (long below
// -2^31), a positive one as uint (ulong from 2^32), a fraction as double; a Date as timestamp.
// Each comes back with its value and JavaScript type; the receiver keeps timestamps as Dates
// (skipConvertingDate), as an application that sends them does. A null property goes in a
// message of its own, so that its fate does not hide the other types': the service keeps it
// (Azure.Messaging.ServiceBus's MessageLiveTests send "null" and read it back as null).
async function sendPropertyTypes(sc) {
  const q = sc.entities.queue;
  const c = sc.client();
  const props = {
    string: 'héllo wörld',
    'empty-string': '',
    int: -70000,
    uint: 4000000000,
    'small-uint': 7,
    zero: 0,
    long: -(2 ** 40),
    ulong: 2 ** 40,
    double: 2.5e-3,
    'negative-double': -1.25,
    'bool-true': true,
    'bool-false': false,
    timestamp: new Date(1700000000123),
  };
  const s = c.createSender(q);
  const p = new Problems();
  await s.sendMessages({ body: Buffer.from('typed'), messageId: 'props-1', applicationProperties: props });
  const sentNull = await p.attempt('send of a message with a null property',
    () => s.sendMessages({ body: Buffer.from('null'), messageId: 'props-null', applicationProperties: { null: null, string: 'x' } }).then(() => true));
  const r = c.createReceiver(q, { ...PEEK_LOCK, skipConvertingDate: true });
  const got = await receive(r, sentNull ? 2 : 1);
  const byId = new Map(got.map((m) => [m.messageId, m]));
  const m = byId.get('props-1');
  if (!m) {
    p.add('the typed message was not received');
  } else {
    const ap = m.applicationProperties || {};
    for (const [k, want] of Object.entries(props)) {
      if (!(k in ap)) {
        p.add(`${k} missing`);
      } else if (want instanceof Date) {
        p.check(ap[k] instanceof Date && ap[k].getTime() === want.getTime(), `${k}: got ${show(ap[k])}, want ${show(want)}`);
      } else {
        p.equal(k, ap[k], want);
      }
    }
    for (const k of Object.keys(ap)) {
      if (!(k in props)) p.add(`unexpected property ${k} = ${show(ap[k])}`);
    }
  }
  if (sentNull) {
    const n = byId.get('props-null');
    if (!n) p.add('the message with a null property was not received');
    else p.equal('properties of the message with a null property', n.applicationProperties, { null: null, string: 'x' });
  }
  for (const x of got) await r.completeMessage(x);
  p.verify();
}

// Bodies: one data section (a Buffer; and JSON, which the SDK writes into a data section and
// parses back), amqp-values and an amqp-sequence through AmqpAnnotatedMessage.bodyType. Several
// data sections are not expressible: the SDK's encoder writes one data section.
async function sendBodyKinds(sc) {
  const q = sc.entities.queue;
  const c = sc.client();
  const data = Buffer.from([0, 1, 2, 3, 0x80, 0xff]);
  const sent = [
    { id: 'data', msg: { body: data, messageId: 'data' }, kind: 'data', want: data },
    { id: 'json', msg: { body: { a: 1, b: ['x', true] }, messageId: 'json' }, kind: 'data', want: { a: 1, b: ['x', true] } },
    { id: 'string', msg: { body: 'text ü', messageId: 'string' }, kind: 'data', want: 'text ü' },
    { id: 'value-string', msg: { body: 'a string value', bodyType: 'value', properties: { messageId: 'value-string' } }, kind: 'value', want: 'a string value' },
    { id: 'value-number', msg: { body: 42, bodyType: 'value', properties: { messageId: 'value-number' } }, kind: 'value', want: 42 },
    {
      id: 'value-map',
      msg: { body: { count: 3, name: 'sbgate', items: ['a', 1], ok: true }, bodyType: 'value', properties: { messageId: 'value-map' } },
      kind: 'value',
      want: { count: 3, name: 'sbgate', items: ['a', 1], ok: true },
    },
    { id: 'sequence', msg: { body: [1, 'two', true, 4.5], bodyType: 'sequence', properties: { messageId: 'sequence' } }, kind: 'sequence', want: [1, 'two', true, 4.5] },
  ];
  const s = c.createSender(q);
  for (const { msg } of sent) await s.sendMessages(msg);
  const r = c.createReceiver(q, PEEK_LOCK);
  const got = await receive(r, sent.length);
  const byId = new Map(got.map((m) => [m.messageId, m]));
  const p = new Problems();
  for (const { id, kind, want } of sent) {
    const m = byId.get(id);
    if (!m) {
      p.add(`${id} not received`);
      continue;
    }
    p.equal(`${id} body type`, m._rawAmqpMessage.bodyType, kind);
    p.equal(`${id} body`, m.body, want);
  }
  for (const m of got) await r.completeMessage(m);
  p.verify();
}

async function receiveAndDelete(sc) {
  const q = sc.entities.queue;
  const c = sc.client();
  await c.createSender(q).sendMessages([0, 1, 2].map((i) => ({ body: Buffer.from(`rd-${i}`) })));
  const rd = c.createReceiver(q, { receiveMode: 'receiveAndDelete' });
  const got = await receive(rd, 3);
  const p = new Problems();
  p.equal('bodies', got.map(bodyText).sort(), ['rd-0', 'rd-1', 'rd-2']);
  // A peek-lock receiver finds nothing: the messages are gone, not locked.
  const r = c.createReceiver(q, PEEK_LOCK);
  await p.attempt('after receive-and-delete', () => expectNothing(r, 'after receive-and-delete'));
  p.equal('messages peeked after receive-and-delete', (await r.peekMessages(10)).length, 0);
  p.verify();
}

async function peekLockComplete(sc) {
  const q = sc.entities.queue;
  const c = sc.client();
  const before = Date.now() - 30000;
  await c.createSender(q).sendMessages({
    body: Buffer.from('peek-lock'), messageId: 'msg-1', subject: 'the-subject', contentType: 'application/octet-stream',
    correlationId: 'corr-1', to: 'someone', replyTo: 'reply-queue', replyToSessionId: 'reply-session', timeToLive: 600000,
  });
  const r = c.createReceiver(q, PEEK_LOCK);
  const m = await receiveOne(r, 'the message');
  const p = new Problems();
  p.equal('body', bodyText(m), 'peek-lock');
  p.equal('messageId', m.messageId, 'msg-1');
  p.equal('subject', m.subject, 'the-subject');
  p.equal('contentType', m.contentType, 'application/octet-stream');
  p.equal('correlationId', m.correlationId, 'corr-1');
  p.equal('to', m.to, 'someone');
  p.equal('replyTo', m.replyTo, 'reply-queue');
  p.equal('replyToSessionId', m.replyToSessionId, 'reply-session');
  p.equal('timeToLive', m.timeToLive, 600000);
  // The JS SDK reports the AMQP header's delivery-count as it is: 0 on a first delivery.
  p.equal('deliveryCount of a first delivery', m.deliveryCount, 0);
  p.equal('state', m.state, 'active');
  p.check(m.sequenceNumber && m.sequenceNumber.toNumber() > 0, `sequenceNumber ${seqString(m.sequenceNumber)}`);
  p.check(m.enqueuedTimeUtc instanceof Date && m.enqueuedTimeUtc.getTime() > before, `enqueuedTimeUtc ${show(m.enqueuedTimeUtc)}`);
  p.check(m.enqueuedTimeUtc instanceof Date && m.expiresAtUtc instanceof Date &&
    m.expiresAtUtc.getTime() === m.enqueuedTimeUtc.getTime() + 600000, `expiresAtUtc ${show(m.expiresAtUtc)}, want enqueuedTimeUtc + 10 min`);
  p.check(m.lockedUntilUtc instanceof Date && m.lockedUntilUtc.getTime() > Date.now(), `lockedUntilUtc ${show(m.lockedUntilUtc)} in the future`);
  p.check(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(m.lockToken || ''), `lockToken ${show(m.lockToken)}`);
  await r.completeMessage(m);
  await p.attempt('after complete', () => expectNothing(r, 'after complete'));
  p.verify();
}

// abandonMessage(message, propertiesToModify): the redelivery carries them, replacing a
// property of the same name and keeping the others.
async function abandonWithProperties(sc) {
  const q = sc.entities.queue;
  const c = sc.client();
  await c.createSender(q).sendMessages({ body: Buffer.from('abandon'), messageId: 'abandon-1', applicationProperties: { keep: 'original', attempt: 1 } });
  const r = c.createReceiver(q, PEEK_LOCK);
  const m = await receiveOne(r, 'the message');
  await r.abandonMessage(m, { attempt: 2, reason: 'retry' });
  const m2 = await receiveOne(r, 'the abandoned message again');
  const p = new Problems();
  p.equal('messageId of the redelivery', m2.messageId, 'abandon-1');
  p.equal('sequenceNumber of the redelivery', seqString(m2.sequenceNumber), seqString(m.sequenceNumber));
  p.equal('deliveryCount after one abandon', m2.deliveryCount, 1);
  p.equal('applicationProperties of the redelivery', m2.applicationProperties, { keep: 'original', attempt: 2, reason: 'retry' });
  await r.completeMessage(m2);
  p.verify();
}

async function deferReceiveDeferred(sc) {
  const q = sc.entities.queue;
  const c = sc.client();
  await c.createSender(q).sendMessages({ body: Buffer.from('deferred'), messageId: 'defer-1' });
  const r = c.createReceiver(q, PEEK_LOCK);
  const m = await receiveOne(r, 'the message');
  await r.deferMessage(m);
  const p = new Problems();
  await p.attempt('a deferred message is not received again', () => expectNothing(r, 'a deferred message is not received again'));
  const deferred = await r.receiveDeferredMessages([m.sequenceNumber]);
  p.equal('deferred messages received by sequence number', deferred.length, 1);
  if (deferred.length === 1) {
    const d = deferred[0];
    p.equal('sequenceNumber', seqString(d.sequenceNumber), seqString(m.sequenceNumber));
    p.equal('messageId', d.messageId, 'defer-1');
    p.equal('body', bodyText(d), 'deferred');
    p.equal('state', d.state, 'deferred');
    p.check(d.lockToken, 'the deferred message has no lock token');
    await p.attempt('completeMessage of the deferred message', () => r.completeMessage(d));
  }
  p.equal('messages peeked after completing the deferred message', (await r.peekMessages(10)).length, 0);
  p.verify();
}

async function deadLetterReason(sc) {
  const q = sc.entities.queue;
  const c = sc.client();
  await c.createSender(q).sendMessages({ body: Buffer.from('to the dlq'), messageId: 'dlq-1' });
  const r = c.createReceiver(q, PEEK_LOCK);
  const m = await receiveOne(r, 'the message');
  await r.deadLetterMessage(m, { deadLetterReason: 'BadOrder', deadLetterErrorDescription: 'the price is missing' });
  const p = new Problems();
  await p.attempt('the dead-lettered message is not in the queue', () => expectNothing(r, 'the dead-lettered message is not in the queue'));
  const dr = c.createReceiver(q, { ...PEEK_LOCK, subQueueType: 'deadLetter' });
  const d = await receiveOne(dr, 'the dead-lettered message');
  p.equal('messageId', d.messageId, 'dlq-1');
  p.equal('body', bodyText(d), 'to the dlq');
  p.equal('deadLetterReason', d.deadLetterReason, 'BadOrder');
  p.equal('deadLetterErrorDescription', d.deadLetterErrorDescription, 'the price is missing');
  await dr.completeMessage(d);
  p.verify();
}

// The queue's lock lasts 10 s: the message is renewed every 2 s until its first lock has lapsed
// by a second, then completed, which only works if the renewals held the lock.
async function renewLock(sc) {
  const q = sc.entities.queue;
  const c = sc.client();
  await c.createSender(q).sendMessages({ body: Buffer.from('renew') });
  const r = c.createReceiver(q, PEEK_LOCK);
  const m = await receiveOne(r, 'the message');
  const first = m.lockedUntilUtc.getTime();
  let last = first;
  let renewals = 0;
  while (Date.now() < first + 1000) {
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const until = await r.renewMessageLock(m);
    renewals++;
    assert.ok(until instanceof Date, `renewMessageLock returned ${show(until)}`);
    assert.ok(until.getTime() >= last && until.getTime() > Date.now(), `renewal ${renewals}: locked until ${show(until)}, previous ${new Date(last).toISOString()}`);
    assert.strictEqual(m.lockedUntilUtc.getTime(), until.getTime(), 'message.lockedUntilUtc after renewal');
    last = until.getTime();
  }
  assert.ok(last > first + 1000, `the renewed lock ${new Date(last).toISOString()} is not later than the first ${new Date(first).toISOString()}`);
  await r.completeMessage(m);
  await expectNothing(r, 'after completing the renewed message');
}

async function peek(sc) {
  const q = sc.entities.queue;
  const c = sc.client();
  const p = new Problems();
  p.equal('peek of an empty queue', (await c.createReceiver(q, PEEK_LOCK).peekMessages(5)).length, 0);
  const s = c.createSender(q);
  for (const i of [0, 1, 2]) await s.sendMessages({ body: Buffer.from(`peek-${i}`) });
  const r = c.createReceiver(q, PEEK_LOCK);
  const seen = await r.peekMessages(10);
  p.equal('peeked bodies', seen.map(bodyText), ['peek-0', 'peek-1', 'peek-2']);
  p.check(seen.every((m) => m.state === 'active'), `states of peeked messages ${show(seen.map((m) => m.state))}`);
  const seqs = seen.map((m) => m.sequenceNumber);
  if (seqs.length === 3 && seqs[0].lessThan(seqs[1]) && seqs[1].lessThan(seqs[2])) {
    const from = await r.peekMessages(10, { fromSequenceNumber: seqs[1] });
    p.equal('peek from the second sequence number', from.map((m) => seqString(m.sequenceNumber)), seqs.slice(1).map(seqString));
  } else {
    p.add(`peeked sequence numbers ${seqs.map(seqString)}`);
  }
  // Peeking locked nothing: all three are received at their first delivery.
  const got = await receive(r, 3);
  p.equal('received bodies', got.map(bodyText), ['peek-0', 'peek-1', 'peek-2']);
  p.equal('delivery counts after peeking', got.map((m) => m.deliveryCount), [0, 0, 0]);
  for (const m of got) await r.completeMessage(m);
  p.verify();
}

// Two messages scheduled 8 s ahead (room for a loaded machine to peek before then), the first
// cancelled. Peek shows the scheduled message on a
// queue but not on a subscription ("Message browsing": scheduled messages are included "Yes for
// queues. No for subscriptions": a topic keeps them until their time). Once active, a scheduled
// message is "appended to the queue as if it had been enqueued at the current instant, which
// includes assigning a new SequenceNumber" ("Message sequencing and timestamps"): the message
// received is recognised by its messageId, and its enqueuedTimeUtc is not before its time.
async function scheduleCancel(sender, receiver, topic) {
  const at = new Date(Date.now() + 8000);
  const seqs = await sender.scheduleMessages(
    [{ body: Buffer.from('cancelled'), messageId: 'sched-1' }, { body: Buffer.from('kept'), messageId: 'sched-2' }], at);
  assert.ok(Array.isArray(seqs) && seqs.length === 2 && !seqs[0].equals(seqs[1]), `scheduleMessages returned ${show(seqs.map(seqString))}`);
  await sender.cancelScheduledMessages(seqs[0]);
  const p = new Problems();
  const peeked = await receiver.peekMessages(10);
  if (Date.now() >= at.getTime()) {
    p.add(`the peek ended after the scheduled time ${at.toISOString()}: what it shows proves nothing`);
  } else if (topic) {
    p.check(peeked.length === 0, `peek of the subscription before the scheduled time shows ${peeked.length} messages ` +
      `(${peeked.map((m) => `${m.messageId} ${m.state} ${seqString(m.sequenceNumber)}`).join(', ')}), want none: scheduled messages stay in the topic`);
  } else if (peeked.length !== 1) {
    p.add(`peek shows ${peeked.length} messages, want the one scheduled message left`);
  } else {
    p.equal('messageId of the peeked message', peeked[0].messageId, 'sched-2');
    p.equal('sequenceNumber of the peeked message', seqString(peeked[0].sequenceNumber), seqString(seqs[1]));
    p.equal('state of the peeked message', peeked[0].state, 'scheduled');
    p.equal('scheduledEnqueueTimeUtc of the peeked message', peeked[0].scheduledEnqueueTimeUtc, at);
  }
  const got = await receive(receiver, 1, 40000);
  const arrived = Date.now();
  if (got.length !== 1) {
    p.add(`${got.length} scheduled messages received within 40 s, want 1`);
    p.verify();
  }
  const m = got[0];
  p.equal('messageId of the message received', m.messageId, 'sched-2');
  p.equal('body of the message received', bodyText(m), 'kept');
  p.equal('state of the message received', m.state, 'active');
  p.equal('scheduledEnqueueTimeUtc', m.scheduledEnqueueTimeUtc, at);
  p.check(arrived >= at.getTime() - 1000, `received at ${new Date(arrived).toISOString()}, before its scheduled time ${at.toISOString()}`);
  p.check(m.enqueuedTimeUtc instanceof Date && m.enqueuedTimeUtc.getTime() >= at.getTime() - 1000,
    `enqueuedTimeUtc ${show(m.enqueuedTimeUtc)}, want not before the scheduled time ${at.toISOString()}`);
  await receiver.completeMessage(m);
  await p.attempt('the cancelled message', () => expectNothing(receiver, 'the cancelled message'));
  p.verify();
}

async function scheduleCancelQueue(sc) {
  const c = sc.client();
  await scheduleCancel(c.createSender(sc.entities.queue), c.createReceiver(sc.entities.queue, PEEK_LOCK), false);
}

async function scheduleCancelTopic(sc) {
  const c = sc.client();
  await scheduleCancel(c.createSender(sc.entities.topic),
    c.createReceiver(sc.entities.topic, sc.entities.subscription, PEEK_LOCK), true);
}

async function sessionState(sc) {
  const q = sc.entities.queue;
  const c = sc.client();
  await c.createSender(q).sendMessages([
    { body: Buffer.from('s1-0'), sessionId: 's-1' }, { body: Buffer.from('s1-1'), sessionId: 's-1' },
    { body: Buffer.from('s2'), sessionId: 's-2' }]);
  const p = new Problems();
  let r = await c.acceptSession(q, 's-1', PEEK_LOCK);
  p.equal('sessionId', r.sessionId, 's-1');
  p.check(r.sessionLockedUntilUtc instanceof Date && r.sessionLockedUntilUtc.getTime() > Date.now(),
    `sessionLockedUntilUtc ${show(r.sessionLockedUntilUtc)}`);
  const initial = await r.getSessionState();
  p.check(initial === null || initial === undefined, `state of a new session: ${show(initial)}, want none`);
  // Bytes that are not JSON come back as the Buffer; anything else the SDK writes as JSON and
  // parses back, which is how JavaScript applications keep state.
  await r.setSessionState(Buffer.from('\u0000state-1'));
  p.equal('state after setSessionState(Buffer)', await r.getSessionState(), Buffer.from('\u0000state-1'));
  await r.setSessionState({ step: 2, items: ['a'] });
  p.equal('state after setSessionState(object)', await r.getSessionState(), { step: 2, items: ['a'] });
  const before = r.sessionLockedUntilUtc.getTime();
  const until = await r.renewSessionLock();
  p.check(until instanceof Date && until.getTime() >= before && until.getTime() > Date.now(), `renewSessionLock returned ${show(until)}`);
  p.equal('sessionLockedUntilUtc after renewSessionLock', r.sessionLockedUntilUtc, until);
  const got = await receive(r, 2);
  p.equal('bodies of session s-1, in order', got.map(bodyText), ['s1-0', 's1-1']);
  p.equal('sessionId of the messages', got.map((m) => m.sessionId), ['s-1', 's-1']);
  for (const m of got) await r.completeMessage(m);
  await p.attempt('session s-1 after its two messages', () => expectNothing(r, 'session s-1 after its two messages'));
  await r.close();
  // The state outlives the receiver.
  r = await c.acceptSession(q, 's-1', PEEK_LOCK);
  p.equal('state seen by the next receiver of the session', await r.getSessionState(), { step: 2, items: ['a'] });
  await r.setSessionState(null);
  p.equal('state after setSessionState(null)', await r.getSessionState(), null);
  await r.close();
  // The next available session is the one with messages left.
  r = await c.acceptNextSession(q, PEEK_LOCK);
  p.equal('sessionId of the next available session', r.sessionId, 's-2');
  const m = await receiveOne(r, 'the message of the next available session');
  p.equal('sessionId of its message', m.sessionId, 's-2');
  await r.completeMessage(m);
  p.verify();
}

// The session "" is a session like any other. @azure/service-bus 7.9.5 cannot receive from it:
// MessageSession.createRheaLink (dist/index.js) treats a provided session id "" as none
// (`!this._providedSessionId && !receivedSessionId`) and throws SessionCannotBeLocked "Failed to
// create a receiver. No unlocked sessions available." after the broker attached the link.
// Sending to it works and is checked.
async function sessionEmptyId(sc) {
  const q = sc.entities.queue;
  const c = sc.client();
  await c.createSender(q).sendMessages([{ body: Buffer.from('other'), sessionId: 'other' }, { body: Buffer.from('empty'), sessionId: '' }]);
  let r;
  try {
    r = await c.acceptSession(q, '', PEEK_LOCK);
  } catch (e) {
    if (isServiceBusError(e) && e.code === 'SessionCannotBeLocked' && /No unlocked sessions available/.test(e.message)) {
      const other = await c.acceptSession(q, 'other', PEEK_LOCK);
      const m = await receiveOne(other, 'the message of session other');
      assert.strictEqual(bodyText(m), 'other');
      await other.completeMessage(m);
      throw new Skip(`@azure/service-bus ${SDK_VERSION} cannot accept the session "": MessageSession.createRheaLink treats ` +
        `the session id "" as none and fails with its own SessionCannotBeLocked ("${e.message}"); sending to it works`);
    }
    throw e;
  }
  const p = new Problems();
  p.equal('sessionId of the receiver', r.sessionId, '');
  const m = await receiveOne(r, 'the message of session ""');
  p.equal('body', bodyText(m), 'empty');
  p.equal('sessionId of the message', m.sessionId, '');
  await r.setSessionState(Buffer.from('\u0000empty-state'));
  p.equal('state of session ""', await r.getSessionState(), Buffer.from('\u0000empty-state'));
  await r.completeMessage(m);
  await p.attempt('session "" after its message', () => expectNothing(r, 'session "" after its message'));
  await r.close();
  const other = await c.acceptSession(q, 'other', PEEK_LOCK);
  const m2 = await receiveOne(other, 'the message of session other');
  p.equal('body of session other', bodyText(m2), 'other');
  const st = await other.getSessionState();
  p.check(st === null || st === undefined, `state of session other: ${show(st)}, want none`);
  await other.completeMessage(m2);
  p.verify();
}

// @azure/service-bus 7.9.5 has no public API to list sessions: its internal ManagementClient has
// listMessageSessions (com.microsoft:get-message-sessions), but neither ServiceBusClient nor its
// receivers nor ServiceBusAdministrationClient expose it. The public surface is checked, so the
// skip ends when a version adds one.
async function listSessions(sc) {
  const c = sc.client();
  const receiver = c.createReceiver(sc.entities.queue, PEEK_LOCK);
  const surfaces = { ServiceBusClient: c, ServiceBusReceiver: receiver };
  const found = [];
  for (const [name, obj] of Object.entries(surfaces)) {
    for (let o = obj; o && o !== Object.prototype; o = Object.getPrototypeOf(o)) {
      for (const k of Object.getOwnPropertyNames(o)) {
        if (/session/i.test(k) && /list|enumerat|get/i.test(k) && !k.startsWith('_') && typeof obj[k] === 'function') found.push(`${name}.${k}`);
      }
    }
  }
  if (found.length) throw new Error(`the SDK now has ${found.join(', ')}: implement the scenario`);
  throw new Skip(`@azure/service-bus ${SDK_VERSION} has no public API to list sessions ` +
    '(ManagementClient.listMessageSessions is internal; ServiceBusClient and its receivers expose none)');
}

async function collect(iter) {
  const out = [];
  for await (const x of iter) out.push(x);
  return out;
}

// Rules through ServiceBusRuleManager (the subscription's $management over AMQP, with the root
// key: rule operations need Manage). The subscription exists with its $Default rule.
async function rules(sc) {
  const t = sc.entities.topic;
  const sub = sc.entities.subscription;
  const c = sc.client(ENV.SB_CONN_ROOT);
  const rm = c.createRuleManager(t, sub);
  const p = new Problems();
  let listed = await collect(rm.listRules());
  p.equal('rules of a new subscription', listed.map((r) => r.name), ['$Default']);
  if (listed.length === 1) p.equal('$Default filter (the SDK reads the true filter as 1=1)', listed[0].filter, { sqlExpression: '1=1' });
  await rm.deleteRule('$Default');
  await rm.createRule('red', { sqlExpression: "color = 'red'" }, { sqlExpression: "SET routed = 'red'" });
  await rm.createRule('order', { correlationId: 'order-1', applicationProperties: { kind: 'order' } });
  listed = await collect(rm.listRules());
  const byName = new Map(listed.map((r) => [r.name, r]));
  p.equal('rule names', listed.map((r) => r.name).sort(), ['order', 'red']);
  const red = byName.get('red');
  if (red) {
    p.equal('red filter expression', red.filter.sqlExpression, "color = 'red'");
    p.equal('red action expression', red.action.sqlExpression, "SET routed = 'red'");
  }
  const order = byName.get('order');
  if (order) {
    p.equal('order filter correlationId', order.filter.correlationId, 'order-1');
    p.equal('order filter applicationProperties', order.filter.applicationProperties, { kind: 'order' });
    p.equal('order action', order.action.sqlExpression, undefined);
  }
  // The rules decide what the subscription receives.
  await c.createSender(t).sendMessages([
    { body: Buffer.from('red'), messageId: 'red', applicationProperties: { color: 'red' } },
    { body: Buffer.from('blue'), messageId: 'blue', applicationProperties: { color: 'blue' } },
    { body: Buffer.from('order'), messageId: 'order', correlationId: 'order-1', applicationProperties: { kind: 'order' } },
    { body: Buffer.from('not-order'), messageId: 'not-order', correlationId: 'order-2', applicationProperties: { kind: 'order' } },
  ]);
  const r = c.createReceiver(t, sub, PEEK_LOCK);
  const got = await receive(r, 2);
  p.equal('messages the rules let through', got.map((m) => m.messageId).sort(), ['order', 'red']);
  const redMsg = got.find((m) => m.messageId === 'red');
  if (redMsg) p.equal("property set by the red rule's action", redMsg.applicationProperties.routed, 'red');
  const orderMsg = got.find((m) => m.messageId === 'order');
  if (orderMsg) p.check(!('routed' in orderMsg.applicationProperties), 'the order message was changed by the red rule\'s action');
  for (const m of got) await r.completeMessage(m);
  await p.attempt('messages no rule matches', () => expectNothing(r, 'messages no rule matches'));
  await rm.deleteRule('order');
  p.equal('rules after deleting one', (await collect(rm.listRules())).map((x) => x.name), ['red']);
  p.verify();
}

async function batch(sc) {
  const q = sc.entities.queue;
  const c = sc.client();
  const s = c.createSender(q);
  const b = await s.createMessageBatch();
  const p = new Problems();
  p.check(b.maxSizeInBytes > 0, `batch maxSizeInBytes ${b.maxSizeInBytes}`);
  for (let i = 0; i < 10; i++) {
    p.check(b.tryAddMessage({ body: Buffer.from(`batch-${i}`), applicationProperties: { i } }), `tryAddMessage ${i} refused`);
  }
  p.equal('messages in the batch', b.count, 10);
  // The batch is bounded by what the broker's attach announced (the queue's
  // MaxMessageSizeInKilobytes, 256 KB as on the Standard tier).
  p.check(!b.tryAddMessage({ body: Buffer.alloc(1 << 20) }), `a batch of at most ${b.maxSizeInBytes} bytes took a 1 MiB message`);
  await s.sendMessages(b);
  await s.sendMessages([0, 1, 2].map((i) => ({ body: Buffer.from(`list-${i}`) })));
  const r = c.createReceiver(q, PEEK_LOCK);
  const got = await receive(r, 13);
  const want = [...Array(10).keys()].map((i) => `batch-${i}`).concat(['list-0', 'list-1', 'list-2']);
  p.equal('bodies received, in order', got.map(bodyText), want);
  for (const m of got) {
    const text = bodyText(m);
    if (text.startsWith('batch-')) p.equal(`property i of ${text}`, m.applicationProperties.i, Number(text.slice(6)));
    await r.completeMessage(m);
  }
  await p.attempt('after the batch', () => expectNothing(r, 'after the batch'));
  p.verify();
}

async function largeMessage(sc) {
  const q = sc.entities.queue;
  const c = sc.client();
  const body = crypto.randomBytes(200 * 1024);
  await c.createSender(q).sendMessages({ body, messageId: 'large' });
  const r = c.createReceiver(q, PEEK_LOCK);
  const m = await receiveOne(r, 'the large message');
  assert.ok(Buffer.isBuffer(m.body), `body ${typeof m.body}`);
  assert.strictEqual(m.body.length, body.length, 'body length');
  assert.ok(m.body.equals(body), 'the body differs from what was sent');
  await r.completeMessage(m);
}

// AMQP over WebSockets: in Node the SDK tunnels only when given a WebSocket implementation
// (webSocketOptions.webSocket), here the `ws` package, trusting the test certificate.
async function websockets(sc) {
  const q = sc.entities.queue;
  const opened = [];
  class RecordingWebSocket extends WebSocket {
    constructor(url, protocols, options) {
      super(url, protocols, options);
      opened.push({ url, protocols });
    }
  }
  const c = sc.client(ENV.SB_WS_CONN, {
    webSocketOptions: { webSocket: RecordingWebSocket, webSocketConstructorOptions: { ca: fs.readFileSync(ENV.SB_CA_FILE) } },
  });
  await c.createSender(q).sendMessages({ body: Buffer.from('over websockets'), messageId: 'ws-1' });
  const r = c.createReceiver(q, PEEK_LOCK);
  const m = await receiveOne(r, 'the message over websockets');
  const p = new Problems();
  p.equal('messageId', m.messageId, 'ws-1');
  p.equal('body', bodyText(m), 'over websockets');
  await r.completeMessage(m);
  p.check(opened.length > 0, 'no WebSocket was opened');
  const host = ENV.SB_WS_CONN.match(/Endpoint=sb:\/\/([^/;]+)/)[1];
  for (const { url, protocols } of opened) {
    p.equal('WebSocket URL', url, `wss://${host}/$servicebus/websocket`);
    p.equal('WebSocket subprotocols', protocols, ['AMQPWSB10']);
  }
  p.verify();
}

// sendRefused sends one message and returns the error the SDK threw.
async function sendRefused(sc, conn, queue, what) {
  const c = sc.client(conn, { retryOptions: { maxRetries: 0, timeoutInMs: 20000 } });
  const s = c.createSender(queue);
  try {
    await s.sendMessages({ body: Buffer.from('must be refused') });
  } catch (e) {
    return e;
  }
  throw new Error(`${what}: no error`);
}

function expectCode(e, code, what) {
  if (!isServiceBusError(e) || e.code !== code) {
    throw new Error(`${what}: ${describe(e)}, want ServiceBusError ${code}`);
  }
}

async function wrongKey(sc) {
  const e = await sendRefused(sc, ENV.SB_CONN_WRONG_KEY, sc.entities.queue, 'send with a wrong key');
  expectCode(e, 'UnauthorizedAccess', 'send with a wrong key');
}

async function missingRight(sc) {
  const q = sc.entities.queue;
  // Listen is enough to receive; sending needs Send.
  const r = sc.client(ENV.SB_CONN_LISTEN_ONLY).createReceiver(q, PEEK_LOCK);
  await expectNothing(r, 'receive with a Listen-only key');
  const e = await sendRefused(sc, ENV.SB_CONN_LISTEN_ONLY, q, 'send with a Listen-only key');
  expectCode(e, 'UnauthorizedAccess', 'send with a Listen-only key');
}

async function missingEntity(sc) {
  const e = await sendRefused(sc, ENV.SB_CONN, sc.entities.queue, 'send to a missing queue');
  expectCode(e, 'MessagingEntityNotFound', 'send to a missing queue');
}

const SCENARIOS = {
  'send-property-types': sendPropertyTypes,
  'send-body-kinds': sendBodyKinds,
  'receive-and-delete': receiveAndDelete,
  'peek-lock-complete': peekLockComplete,
  'abandon-with-properties': abandonWithProperties,
  'defer-receive-deferred': deferReceiveDeferred,
  'dead-letter-reason': deadLetterReason,
  'renew-lock': renewLock,
  peek,
  'schedule-cancel-queue': scheduleCancelQueue,
  'schedule-cancel-topic': scheduleCancelTopic,
  'session-state': sessionState,
  'session-empty-id': sessionEmptyId,
  'list-sessions': listSessions,
  rules,
  batch,
  'large-message': largeMessage,
  websockets,
  'wrong-key': wrongKey,
  'missing-right': missingRight,
  'missing-entity': missingEntity,
};

function report(name, verdict) {
  console.log(`SCENARIO ${name} ${String(verdict).split(/\s+/).join(' ')}`);
}

async function run(name) {
  const sc = new Scenario(name);
  let timer;
  const timeout = new Promise((resolve) => {
    timer = setTimeout(() => resolve(`FAIL timed out after ${SCENARIO_TIMEOUT_MS / 1000} s`), SCENARIO_TIMEOUT_MS);
  });
  const work = (async () => {
    try {
      await SCENARIOS[name](sc);
      return 'PASS';
    } catch (e) {
      if (e instanceof Skip) return `SKIP ${e.message}`;
      return `FAIL ${describe(e)}`;
    }
  })();
  const verdict = await Promise.race([work, timeout]);
  clearTimeout(timer);
  await Promise.race([sc.end(), new Promise((resolve) => setTimeout(resolve, 10000))]);
  return verdict;
}

async function main() {
  console.log(`STACK @azure/service-bus ${SDK_VERSION} on Node ${process.version}`);
  const wanted = (ENV.SB_SCENARIOS || '').split(',').filter(Boolean);
  const names = wanted.length ? wanted : Object.keys(SCENARIOS);
  const unknown = names.filter((n) => !SCENARIOS[n]);
  if (unknown.length) {
    console.log(`unknown scenarios: ${unknown.join(', ')}`);
    return 2;
  }
  const queue = [...names];
  const workers = Array.from({ length: PARALLEL }, async () => {
    while (queue.length) {
      const name = queue.shift();
      const start = Date.now();
      const verdict = await run(name);
      report(name, verdict);
      console.log(`TIME ${name} ${((Date.now() - start) / 1000).toFixed(1)}s`);
    }
  });
  await Promise.all(workers);
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
