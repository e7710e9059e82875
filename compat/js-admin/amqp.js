// Sends and receives over AMQP with the official @azure/service-bus ServiceBusClient (plain
// AMQP through UseDevelopmentEmulator=true). CONN is the connection string; QUEUE a queue and
// SESSION_QUEUE a session queue that compat_test.go created.
'use strict';
const assert = require('assert');
const { ServiceBusClient } = require('@azure/service-bus');
const { wait, receiveN } = require('./receive');

const client = new ServiceBusClient(process.env.CONN);
const q = process.env.QUEUE;
const sq = process.env.SESSION_QUEUE;

async function main() {
  const sender = client.createSender(q);
  await sender.sendMessages({
    body: Buffer.from('hello'), messageId: 'm1', subject: 'greeting', contentType: 'text/plain',
    correlationId: 'c1', applicationProperties: { color: 'red', n: 42, ok: true },
  });
  await sender.sendMessages([{ body: Buffer.from('complete') }, { body: Buffer.from('abandon') },
    { body: Buffer.from('dead') }, { body: Buffer.from('defer') }]);

  // Receive-and-delete.
  const rad = client.createReceiver(q, { receiveMode: 'receiveAndDelete' });
  const [first] = await rad.receiveMessages(1, wait);
  assert.strictEqual(first.body.toString(), 'hello');
  assert.strictEqual(first.messageId, 'm1');
  assert.strictEqual(first.subject, 'greeting');
  assert.strictEqual(first.contentType, 'text/plain');
  assert.strictEqual(first.correlationId, 'c1');
  assert.deepStrictEqual(first.applicationProperties, { color: 'red', n: 42, ok: true });
  assert.ok(first.sequenceNumber.toNumber() >= 1);
  assert.ok(first.enqueuedTimeUtc instanceof Date);
  await rad.close();

  // Peek-lock: peek, complete, abandon, dead-letter, defer, renew, receive deferred.
  const receiver = client.createReceiver(q);
  const peeked = await receiver.peekMessages(10);
  assert.deepStrictEqual(peeked.map((m) => m.body.toString()), ['complete', 'abandon', 'dead', 'defer']);
  const [c, a, d, f] = await receiveN(receiver, 4);
  assert.deepStrictEqual([c, a, d, f].map((m) => m.body.toString()), ['complete', 'abandon', 'dead', 'defer']);
  assert.ok(c.lockToken && c.lockedUntilUtc > new Date(Date.now() - 1000));
  await receiver.completeMessage(c);
  const renewed = await receiver.renewMessageLock(a);
  assert.ok(renewed instanceof Date);
  await receiver.abandonMessage(a);
  await receiver.deadLetterMessage(d, { deadLetterReason: 'bad', deadLetterErrorDescription: 'very bad' });
  await receiver.deferMessage(f);
  const [again] = await receiveN(receiver, 1);
  assert.strictEqual(again.body.toString(), 'abandon');
  assert.strictEqual(again.deliveryCount, 1);
  await receiver.completeMessage(again);
  const [deferred] = await receiver.receiveDeferredMessages([f.sequenceNumber]);
  assert.strictEqual(deferred.body.toString(), 'defer');
  await receiver.completeMessage(deferred);
  // Gone now: the SDK's MessageNotFound, not a missing entity.
  await assert.rejects(receiver.receiveDeferredMessages([f.sequenceNumber]),
    (err) => err.code === 'MessageNotFound' || assert.fail(`receive of a completed deferred message: ${err.code} ${err}`));
  await receiver.close();

  const dlq = client.createReceiver(q, { subQueueType: 'deadLetter' });
  const [dead] = await receiveN(dlq, 1);
  assert.strictEqual(dead.body.toString(), 'dead');
  assert.strictEqual(dead.deadLetterReason, 'bad');
  assert.strictEqual(dead.deadLetterErrorDescription, 'very bad');
  await dlq.completeMessage(dead);
  await dlq.close();

  // Schedule, then cancel by the sequence numbers scheduling answered.
  const at = new Date(Date.now() + 3600 * 1000);
  const seqs = await sender.scheduleMessages([{ body: Buffer.from('later-1') }, { body: Buffer.from('later-2') }], at);
  assert.strictEqual(seqs.length, 2);
  const browser = client.createReceiver(q);
  const scheduled = await browser.peekMessages(10);
  assert.deepStrictEqual(scheduled.map((m) => m.body.toString()), ['later-1', 'later-2']);
  assert.deepStrictEqual(scheduled.map((m) => m.sequenceNumber.toString()), seqs.map((n) => n.toString()));
  assert.ok(scheduled.every((m) => m.state === 'scheduled'), 'peeked messages are scheduled');
  await sender.cancelScheduledMessages(seqs);
  await browser.close();
  const browser2 = client.createReceiver(q);
  assert.deepStrictEqual(await browser2.peekMessages(10), []);
  await browser2.close();

  // Sessions with state.
  const ss = client.createSender(sq);
  await ss.sendMessages([{ body: Buffer.from('s1'), sessionId: 'a' }, { body: Buffer.from('s2'), sessionId: 'a' }]);
  const session = await client.acceptNextSession(sq);
  assert.strictEqual(session.sessionId, 'a');
  const smsgs = await receiveN(session, 2);
  assert.deepStrictEqual(smsgs.map((m) => m.body.toString()), ['s1', 's2']);
  for (const m of smsgs) await session.completeMessage(m);
  await session.setSessionState(Buffer.from('state'));
  assert.strictEqual((await session.getSessionState()).toString(), 'state');
  await session.renewSessionLock();
  await session.close();

  await sender.close();
  await ss.close();
  await client.close();
  console.log('all checks passed');
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
