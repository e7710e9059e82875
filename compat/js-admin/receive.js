// What the ServiceBusClient scripts (amqp.js, websocket.js) share for receiving.
'use strict';
const assert = require('assert');

// How long one receiveMessages call waits for a message.
const wait = { maxWaitTimeInMs: 5000 };

// receiveN receives n messages from receiver, failing when a receive within wait gets none.
async function receiveN(receiver, n) {
  const got = [];
  while (got.length < n) {
    const msgs = await receiver.receiveMessages(n - got.length, wait);
    assert.ok(msgs.length > 0, `expected ${n} messages, got ${got.length}`);
    got.push(...msgs);
  }
  return got;
}

module.exports = { wait, receiveN };
