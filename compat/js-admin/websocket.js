// Sends and receives with the official @azure/service-bus ServiceBusClient over AMQP over
// WebSockets. In Node the SDK tunnels only when given a WebSocket implementation
// (webSocketOptions.webSocket; it ignores a global WebSocket there, and Node before 22 has none):
// the `ws` package. It then dials wss://<host>:<port>/$servicebus/websocket, subprotocol
// AMQPWSB10, taking host and port from the connection string's Endpoint. CONN is a connection
// string for sbgate's https listener (no AMQP listener on that port: only the tunnel reaches
// it), CA_FILE the certificate to trust, QUEUE a queue compat/websocket_test.go created.
'use strict';
const assert = require('assert');
const fs = require('fs');
const WebSocket = require('ws');
const { ServiceBusClient } = require('@azure/service-bus');
const { receiveN } = require('./receive');

const opened = [];
class RecordingWebSocket extends WebSocket {
  constructor(url, protocols, options) {
    super(url, protocols, options);
    opened.push({ url, protocols });
  }
}

const client = new ServiceBusClient(process.env.CONN, {
  webSocketOptions: {
    webSocket: RecordingWebSocket,
    // Passed to new WebSocket(url, protocols, options), and by ws to the TLS connection.
    webSocketConstructorOptions: { ca: fs.readFileSync(process.env.CA_FILE) },
  },
  retryOptions: { maxRetries: 0 },
});
const q = process.env.QUEUE;

async function main() {
  const sender = client.createSender(q);
  // 200 KB: transfers of several frames, written in several WebSocket messages.
  const large = Buffer.alloc(200 * 1024, 'x');
  await sender.sendMessages([
    { body: Buffer.from('hello'), messageId: 'm1', applicationProperties: { color: 'red', n: 42 } },
    { body: large },
    { body: Buffer.from('dead') },
  ]);
  await sender.close();

  const receiver = client.createReceiver(q);
  const [m1, big, dead] = await receiveN(receiver, 3);
  assert.strictEqual(m1.body.toString(), 'hello');
  assert.strictEqual(m1.messageId, 'm1');
  assert.deepStrictEqual(m1.applicationProperties, { color: 'red', n: 42 });
  assert.ok(Buffer.from(big.body).equals(large), 'the 200 KB body came back changed');
  await receiver.completeMessage(m1);
  await receiver.completeMessage(big);
  await receiver.deadLetterMessage(dead, { deadLetterReason: 'r', deadLetterErrorDescription: 'd' });
  await receiver.close();

  const dlq = client.createReceiver(q, { subQueueType: 'deadLetter', receiveMode: 'receiveAndDelete' });
  const [dl] = await receiveN(dlq, 1);
  assert.strictEqual(dl.body.toString(), 'dead');
  assert.strictEqual(dl.deadLetterReason, 'r');
  await dlq.close();

  const left = await client.createReceiver(q).peekMessages(10);
  assert.strictEqual(left.length, 0, 'messages left after settling');
  await client.close();

  assert.ok(opened.length >= 1, 'no WebSocket was opened');
  for (const { url, protocols } of opened) {
    assert.match(url, /^wss:\/\/[^/]+:\d+\/\$servicebus\/websocket$/);
    assert.deepStrictEqual(protocols, ['AMQPWSB10']);
  }
  console.log(`websockets opened: ${opened.map((o) => o.url).join(', ')}`);
  console.log('all checks passed');
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
