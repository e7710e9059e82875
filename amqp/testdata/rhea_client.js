// rhea_client.js drives the engine with rhea (the AMQP client of the Node Service Bus SDK)
// for TestRheaInterop: node rhea_client.js <host> <port> <path to the rhea module>.
// It prints one "ok <step>" line per step and exits 0, or prints "FAIL ..." and exits 1.
'use strict';

const [host, port, rheaPath] = process.argv.slice(2);
const rhea = require(rheaPath);

let finished = false;
function fail(msg) {
  console.log('FAIL ' + msg);
  process.exit(1);
}
const overall = setTimeout(() => fail('timeout'), 20000);

const container = rhea.create_container({ id: 'rhea-interop' });
const conn = container.connect({
  host, port: Number(port), hostname: '127.0.0.1', reconnect: false, idle_time_out: 3000,
  username: 'anonymous', // rhea does SASL (ANONYMOUS here) only when given a user, as the SDK does
});
conn.on('connection_error', (ctx) => fail('connection error ' + JSON.stringify(ctx.connection.error)));
conn.on('disconnected', (ctx) => { if (!finished) fail('disconnected ' + (ctx.error && ctx.error.message)); });

// Each step returns a promise; they run in order.
function waitFor(emitter, event, filter) {
  return new Promise((resolve) => {
    const handler = (ctx) => {
      if (filter && !filter(ctx)) return;
      emitter.removeListener(event, handler);
      resolve(ctx);
    };
    emitter.on(event, handler);
  });
}

async function main() {
  await waitFor(conn, 'connection_open');
  console.log('ok open');

  // Send unsettled: accepted, then rejected with the handler's error.
  const sender = conn.open_sender({ target: { address: 'rq' } });
  await waitFor(sender, 'sendable');
  const outcomes = [];
  sender.on('accepted', (ctx) => outcomes.push(['accepted', ctx.delivery.tag.toString()]));
  sender.on('rejected', (ctx) => outcomes.push(['rejected', ctx.delivery.tag.toString(), ctx.delivery.remote_state.error.condition]));
  sender.send({ message_id: 'm1', body: 'one', application_properties: { n: 1 } }, 't1');
  sender.send({ message_id: 'm2', body: 'two', application_properties: { outcome: 'reject' } }, 't2');
  sender.send({ message_id: 'm3', body: 'three' }, 't3');
  while (outcomes.length < 3) await waitFor(sender, 'settled');
  const want = JSON.stringify([['accepted', 't1'], ['rejected', 't2', 'com.microsoft:dead-letter'], ['accepted', 't3']]);
  if (JSON.stringify(outcomes) !== want) fail('outcomes ' + JSON.stringify(outcomes));
  console.log('ok send');

  // Receive with manual credit, then drain the credit left: the answer must come fast.
  const receiver = conn.open_receiver({ source: { address: 'rq' }, credit_window: 0, autoaccept: false });
  await waitFor(receiver, 'receiver_open');
  const got = [];
  receiver.on('message', (ctx) => { got.push(ctx.message.body); ctx.delivery.accept(); });
  receiver.add_credit(10);
  while (got.length < 2) await waitFor(receiver, 'message');
  if (JSON.stringify(got) !== JSON.stringify(['one', 'three'])) fail('received ' + JSON.stringify(got));
  const start = Date.now();
  const drained = waitFor(receiver, 'receiver_drained');
  receiver.drain_credit();
  await drained;
  const took = Date.now() - start;
  if (took > 200) fail('drain answered after ' + took + 'ms');
  if (receiver.credit !== 0 || receiver.delivery_count !== 10) {
    fail('after drain credit ' + receiver.credit + ' delivery-count ' + receiver.delivery_count);
  }
  console.log('ok drain');

  // Credit after a drain works (rhea adopted the delivery-count the server advanced).
  receiver.drain = false;
  sender.send({ body: 'after' });
  receiver.add_credit(1);
  await waitFor(receiver, 'message', (ctx) => ctx.message.body === 'after');
  console.log('ok credit after drain');

  // Receiver settle mode second: the server settles after the client's outcome.
  sender.send({ body: 'second' });
  const second = conn.open_receiver({
    source: { address: 'rq' }, credit_window: 5, autoaccept: false, rcv_settle_mode: 1,
  });
  const msg = await waitFor(second, 'message');
  const settledByServer = waitFor(second, 'settled');
  msg.delivery.accept(); // in mode second: accepted, unsettled
  const settled = await settledByServer;
  if (!settled.delivery.remote_settled) fail('not settled by the server');
  second.close();
  console.log('ok settle mode second');

  // $cbs-style request/response: the reply link has a name and no target address.
  const cbsReceiver = conn.open_receiver({ name: 'cbs-reply-link', source: { address: '$cbs' }, credit_window: 10 });
  await waitFor(cbsReceiver, 'receiver_open');
  const cbsSender = conn.open_sender({ target: { address: '$cbs' } });
  await waitFor(cbsSender, 'sendable');
  const reply = waitFor(cbsReceiver, 'message');
  cbsSender.send({ message_id: 'req-1', reply_to: 'cbs-reply-link', body: 'token',
    application_properties: { operation: 'put-token' } });
  const r = await reply;
  if (r.message.body !== 'ok:token' || r.message.correlation_id !== 'req-1' || r.message.application_properties['status-code'] !== 200) {
    fail('reply ' + JSON.stringify(r.message));
  }
  console.log('ok request response');

  // A refused attach: the receiver errors with the handler's condition.
  const missing = conn.open_receiver({ source: { address: 'missing' } });
  const err = await waitFor(missing, 'receiver_error');
  if (!err.receiver.error || err.receiver.error.condition !== 'amqp:not-found') fail('refusal ' + JSON.stringify(err.receiver.error));
  console.log('ok refused attach');

  finished = true;
  conn.close();
  await waitFor(conn, 'connection_close');
  clearTimeout(overall);
  console.log('ok closed');
}

main().catch((e) => fail(e.stack));
