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
    brokerProperties: {
      Label: 'L1', MessageId: 'm1', CorrelationId: 'c1', TimeToLive: 3600, ViaPartitionKey: 'vpk',
      ScheduledEnqueueTimeUtc: 'Tue, 02 Jan 2024 03:04:05 GMT', // in the past: delivered at once
    },
    // Properties named like HTTP headers are properties all the same.
    customProperties: {
      pint: 1, pfloat: 2.5, pstr: 'a b', pbool: true, pdate: sentDate,
      origin: 'web', via: 'v', referer: 'r', pragma: 'p', 'cache-control': 'c', forwarded: 'f',
    },
  }, cb));

  const { result: msg } = await call((cb) => sb.receiveQueueMessage(q, { isPeekLock: true, timeoutIntervalInS: 5 }, cb));
  assert.strictEqual(msg.body, 'hello');
  assert.strictEqual(msg.brokerProperties.Label, 'L1');
  assert.strictEqual(msg.brokerProperties.MessageId, 'm1');
  assert.strictEqual(msg.brokerProperties.CorrelationId, 'c1');
  assert.strictEqual(msg.brokerProperties.DeliveryCount, 1);
  assert.ok(msg.brokerProperties.LockToken);
  assert.deepStrictEqual(Object.keys(msg.customProperties).sort(),
    ['cache-control', 'forwarded', 'origin', 'pbool', 'pdate', 'pfloat', 'pint', 'pragma', 'pstr', 'referer', 'via']);
  for (const [k, v] of Object.entries({ origin: 'web', via: 'v', referer: 'r', pragma: 'p', 'cache-control': 'c', forwarded: 'f' })) {
    assert.strictEqual(msg.customProperties[k], v, k);
  }
  // Read-only broker properties: ExpiresAtUtc = EnqueuedTimeUtc + TimeToLive; the past schedule
  // and ViaPartitionKey as sent; not forwarded, so EnqueuedSequenceNumber 0.
  const enqueued = new Date(msg.brokerProperties.EnqueuedTimeUtc).getTime();
  assert.strictEqual(new Date(msg.brokerProperties.ExpiresAtUtc).getTime(), enqueued + 3600 * 1000);
  assert.strictEqual(msg.brokerProperties.ScheduledEnqueueTimeUtc, 'Tue, 02 Jan 2024 03:04:05 GMT');
  assert.strictEqual(msg.brokerProperties.ViaPartitionKey, 'vpk');
  assert.strictEqual(msg.brokerProperties.EnqueuedSequenceNumber, 0);
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

  await topics();
  console.log('azure-sb: all checks passed');
}

// Topics, subscriptions and rules through azure-sb's own functions.
async function topics() {
  const t = 'azure-sb-topic-' + Date.now();
  await call((cb) => sb.createTopic(t, { DefaultMessageTimeToLive: 'PT1H' }, cb));
  await call((cb) => sb.createTopicIfNotExists(t, cb));
  const { result: topic } = await call((cb) => sb.getTopic(t, cb));
  assert.strictEqual(topic.TopicName, t);
  assert.strictEqual(topic.DefaultMessageTimeToLive, 'PT1H');

  await call((cb) => sb.createSubscription(t, 'all', {}, cb));
  await call((cb) => sb.createSubscription(t, 'eu', { LockDuration: 'PT30S' }, cb));
  const { result: sub } = await call((cb) => sb.getSubscription(t, 'eu', cb));
  assert.strictEqual(sub.SubscriptionName, 'eu');
  assert.strictEqual(sub.LockDuration, 'PT30S');
  const { result: subs } = await call((cb) => sb.listSubscriptions(t, cb));
  assert.deepStrictEqual(subs.map((x) => x.SubscriptionName).sort(), ['all', 'eu']);

  // Replace eu's $Default rule with a SQL filter.
  await call((cb) => sb.deleteRule(t, 'eu', '$Default', cb));
  await call((cb) => sb.createRule(t, 'eu', 'region', { sqlExpressionFilter: "region = 'eu'" }, cb));
  const { result: rules } = await call((cb) => sb.listRules(t, 'eu', cb));
  assert.deepStrictEqual(rules.map((x) => x.RuleName), ['region']);
  const { result: rule } = await call((cb) => sb.getRule(t, 'eu', 'region', cb));
  assert.strictEqual(rule.Filter.SqlExpression, "region = 'eu'");

  await call((cb) => sb.sendTopicMessage(t, { body: 'to-eu', customProperties: { region: 'eu' } }, cb));
  await call((cb) => sb.sendTopicMessage(t, { body: 'to-us', customProperties: { region: 'us' } }, cb));

  const received = async (s) => {
    const out = [];
    for (;;) {
      try {
        const { result: m } = await call((cb) => sb.receiveSubscriptionMessage(t, s, { isPeekLock: true, timeoutIntervalInS: 1 }, cb));
        await call((cb) => sb.deleteMessage(m, cb)); // settles through the subscription's Location
        out.push(m.body);
      } catch (e) {
        if (/No messages to receive/.test(String(e))) return out;
        throw e;
      }
    }
  };
  assert.deepStrictEqual(await received('all'), ['to-eu', 'to-us']);
  assert.deepStrictEqual(await received('eu'), ['to-eu']);

  await call((cb) => sb.deleteSubscription(t, 'all', cb));
  await call((cb) => sb.deleteTopic(t, cb));
  await assert.rejects(call((cb) => sb.getTopic(t, cb)), (err) => err.code === 'TopicNotFound');
}

main().catch((err) => {
  console.error('azure-sb compatibility check failed:', err);
  process.exit(1);
});
