// The JS SDK against sbgate in emulator mode, configured as the emulator's documentation says:
// DATA is the emulator's connection string verbatim (Endpoint=sb://localhost, no port: 5672),
// ADMIN the same with the management port (the administration client of @azure/service-bus
// 7.9.5 ignores UseDevelopmentEmulator and speaks https to host:port; NODE_EXTRA_CA_CERTS trusts
// the test certificate). Run by program's TestEmulatorSDKsVerbatim.
const { ServiceBusClient, ServiceBusAdministrationClient } = require("@azure/service-bus");

async function main() {
  const admin = new ServiceBusAdministrationClient(process.env.ADMIN);
  const declared = await admin.getQueue("queue.1");
  if (declared.maxDeliveryCount !== 3) throw new Error(`queue.1 maxDeliveryCount ${declared.maxDeliveryCount}, want 3 (Config.json)`);
  await admin.createQueue("js-admin", { lockDuration: "PT30S" });

  const client = new ServiceBusClient(process.env.DATA);
  const sender = client.createSender("js-admin");
  await sender.sendMessages({ body: "from js", applicationProperties: { n: 1 } });
  const receiver = client.createReceiver("js-admin");
  const got = await receiver.receiveMessages(1, { maxWaitTimeInMs: 30000 });
  if (got.length !== 1 || got[0].body !== "from js") throw new Error(`received ${JSON.stringify(got.map((m) => m.body))}`);
  await receiver.completeMessage(got[0]);
  await client.close();
  console.log("all checks passed");
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
