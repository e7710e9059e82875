// Drives sbgate with the npm azure-sb client (the maintained Node REST messaging client) and
// fails on any difference from what the client gets from Service Bus. CONN is the connection
// string; compat_test.go starts the server and runs this.
'use strict';
const assert = require('assert');
const azure = require('azure-sb');

const sb = azure.createServiceBusService(process.env.CONN);
const q = 'azure-sb-' + Date.now(); // azure-sb takes a queue's name from the first path segment of its id

const call = (fn) => new Promise((resolve, reject) =>
  fn((err, result, response) => (err ? reject(err) : resolve({ result, response }))));

async function main() {
  await call((cb) => sb.createQueue(q, { LockDuration: 'PT45S', MaxDeliveryCount: 5 }, cb));
  await call((cb) => sb.createQueueIfNotExists(q, cb)); // 409 is success to it
  const { result: queue } = await call((cb) => sb.getQueue(q, cb));
  assert.strictEqual(queue.QueueName, q);
  assert.strictEqual(queue.LockDuration, 'PT45S');
  assert.strictEqual(queue.MaxDeliveryCount, '5');

  const sentDate = new Date(Date.UTC(2024, 0, 2, 3, 4, 5));
  await call((cb) => sb.sendQueueMessage(q, {
    body: 'hello',
    brokerProperties: { Label: 'L1', MessageId: 'm1', CorrelationId: 'c1' },
    customProperties: { pint: 1, pfloat: 2.5, pstr: 'a b', pbool: true, pdate: sentDate },
  }, cb));

  const { result: msg } = await call((cb) => sb.receiveQueueMessage(q, { isPeekLock: true, timeoutIntervalInS: 5 }, cb));
  assert.strictEqual(msg.body, 'hello');
  assert.strictEqual(msg.brokerProperties.Label, 'L1');
  assert.strictEqual(msg.brokerProperties.MessageId, 'm1');
  assert.strictEqual(msg.brokerProperties.CorrelationId, 'c1');
  assert.strictEqual(msg.brokerProperties.DeliveryCount, 1);
  assert.ok(msg.brokerProperties.LockToken);
  assert.deepStrictEqual(Object.keys(msg.customProperties).sort(), ['pbool', 'pdate', 'pfloat', 'pint', 'pstr']);
  assert.strictEqual(msg.customProperties.pint, 1);
  assert.strictEqual(msg.customProperties.pfloat, 2.5);
  assert.strictEqual(msg.customProperties.pstr, 'a b');
  assert.strictEqual(msg.customProperties.pbool, true);
  assert.strictEqual(new Date(msg.customProperties.pdate).getTime(), sentDate.getTime());

  // Settlement goes to the path azure-sb derives from Location.
  await call((cb) => sb.renewLockForMessage(msg, cb));
  await call((cb) => sb.unlockMessage(msg, cb));
  const { result: again } = await call((cb) => sb.receiveQueueMessage(q, { isPeekLock: true, timeoutIntervalInS: 5 }, cb));
  assert.strictEqual(again.brokerProperties.DeliveryCount, 2);
  await call((cb) => sb.deleteMessage(again, cb));
  await assert.rejects(call((cb) => sb.deleteMessage(again, cb))); // the lock is gone

  await call((cb) => sb.sendQueueMessage(q, 'second', cb));
  const { result: second } = await call((cb) => sb.receiveQueueMessage(q, { timeoutIntervalInS: 5 }, cb));
  assert.strictEqual(second.body, 'second');
  await assert.rejects(call((cb) => sb.receiveQueueMessage(q, { timeoutIntervalInS: 1 }, cb)), /No messages to receive/);

  const { result: list } = await call((cb) => sb.listQueues({ top: 100 }, cb));
  assert.ok(list.some((x) => x.QueueName === q), 'listQueues lists the queue');

  await call((cb) => sb.deleteQueue(q, cb));
  await assert.rejects(call((cb) => sb.getQueue(q, cb)), (err) => err.code === 'QueueNotFound');
  console.log('azure-sb: all checks passed');
}

main().catch((err) => {
  console.error('azure-sb compatibility check failed:', err);
  process.exit(1);
});
