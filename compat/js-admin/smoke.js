// Drives sbgate's management API with the official @azure/service-bus
// ServiceBusAdministrationClient (https only; the certificate is trusted through
// NODE_EXTRA_CA_CERTS). CONN is the connection string; compat_test.go starts the server.
'use strict';
const assert = require('assert');
const { ServiceBusAdministrationClient } = require('@azure/service-bus');

const admin = new ServiceBusAdministrationClient(process.env.CONN);
const suffix = Date.now();

async function main() {
  const q = 'js-queue-' + suffix;
  const created = await admin.createQueue(q, { lockDuration: 'PT45S', maxDeliveryCount: 7, requiresDuplicateDetection: true });
  assert.strictEqual(created.name, q);
  assert.strictEqual(created.lockDuration, 'PT45S');
  assert.strictEqual(created.maxDeliveryCount, 7);
  assert.strictEqual(await admin.queueExists(q), true);
  assert.strictEqual(await admin.queueExists('nope-' + suffix), false);

  const got = await admin.getQueue(q);
  assert.strictEqual(got.requiresDuplicateDetection, true);
  got.maxDeliveryCount = 9;
  const updated = await admin.updateQueue(got);
  assert.strictEqual(updated.maxDeliveryCount, 9);

  const runtime = await admin.getQueueRuntimeProperties(q);
  assert.strictEqual(runtime.name, q);
  assert.strictEqual(runtime.totalMessageCount, 0);
  assert.strictEqual(runtime.activeMessageCount, 0);

  const names = [];
  for await (const qp of admin.listQueues({ maxPageSize: 1 })) names.push(qp.name);
  assert.ok(names.includes(q), 'listQueues pages by rel="next" and finds the queue');
  for await (const rp of admin.listQueuesRuntimeProperties()) assert.ok(rp.name);

  const t = 'js-topic-' + suffix;
  await admin.createTopic(t, { defaultMessageTimeToLive: 'PT1H' });
  const topic = await admin.getTopic(t);
  assert.strictEqual(topic.defaultMessageTimeToLive, 'PT1H');
  await admin.getTopicRuntimeProperties(t);

  await admin.createSubscription(t, 'all');
  await admin.createSubscription(t, 'eu', {
    defaultRuleOptions: { name: 'region', filter: { sqlExpression: "region = @r", sqlParameters: { '@r': 'eu' } } },
  });
  const sub = await admin.getSubscription(t, 'eu');
  assert.strictEqual(sub.subscriptionName, 'eu');
  await admin.getSubscriptionRuntimeProperties(t, 'eu');
  const subs = [];
  for await (const s of admin.listSubscriptions(t)) subs.push(s.subscriptionName);
  assert.deepStrictEqual(subs.sort(), ['all', 'eu']);

  const rule = await admin.getRule(t, 'eu', 'region');
  assert.strictEqual(rule.filter.sqlExpression, 'region = @r');
  assert.deepStrictEqual(rule.filter.sqlParameters, { '@r': 'eu' });
  await admin.createRule(t, 'all', 'urgent', { correlationId: 'c1', applicationProperties: { prio: 1 } },
    { sqlExpression: "SET sys.Label = 'urgent'" });
  const corr = await admin.getRule(t, 'all', 'urgent');
  assert.strictEqual(corr.filter.correlationId, 'c1');
  assert.strictEqual(corr.filter.applicationProperties.prio, 1);
  assert.strictEqual(corr.action.sqlExpression, "SET sys.Label = 'urgent'");
  // Every value type the client writes reads back as it was written (numbers go out as
  // double, one above 32 bits included).
  const params = { '@n': 5, '@big': 5000000000, '@f': 1.5, '@s': 'x', '@b': true, '@d': new Date('2024-01-02T03:04:05.678Z') };
  await admin.createRule(t, 'all', 'typed', { sqlExpression: 'n = @n AND big = @big AND f = @f AND s = @s AND b = @b AND d = @d', sqlParameters: params },
    { sqlExpression: 'SET m = @m', sqlParameters: { '@m': -2.25 } });
  await admin.createRule(t, 'all', 'typed-corr', { applicationProperties: { n: 5, big: 5000000000, s: 'x', b: false } });
  const typed = await admin.getRule(t, 'all', 'typed');
  assert.deepStrictEqual(typed.filter.sqlParameters, params);
  assert.deepStrictEqual(typed.action.sqlParameters, { '@m': -2.25 });
  const typedCorr = await admin.getRule(t, 'all', 'typed-corr');
  assert.deepStrictEqual(typedCorr.filter.applicationProperties, { n: 5, big: 5000000000, s: 'x', b: false });
  typed.filter.sqlParameters['@big'] = 6000000000;
  const typedUpdated = await admin.updateRule(t, 'all', typed);
  assert.strictEqual(typedUpdated.filter.sqlParameters['@big'], 6000000000);
  await admin.deleteRule(t, 'all', 'typed');
  await admin.deleteRule(t, 'all', 'typed-corr');

  const rules = [];
  for await (const r of admin.listRules(t, 'all')) rules.push(r.name);
  assert.deepStrictEqual(rules.sort(), ['$Default', 'urgent']);
  await admin.deleteRule(t, 'all', 'urgent');
  assert.strictEqual(await admin.ruleExists(t, 'all', 'urgent'), false);

  await admin.deleteSubscription(t, 'all');
  await admin.deleteTopic(t);
  assert.strictEqual(await admin.topicExists(t), false);
  await admin.deleteQueue(q);
  await assert.rejects(admin.getQueue(q), (err) => err.code === 'MessageEntityNotFoundError');

  const ns = await admin.getNamespaceProperties();
  assert.ok(ns.name);
  console.log('js-admin: all checks passed');
}

main().catch((err) => {
  console.error('@azure/service-bus administration client check failed:', err);
  process.exit(1);
});
