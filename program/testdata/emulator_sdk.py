"""azure-servicebus (pyamqp) against sbgate in emulator mode, configured as the emulator's
documentation says: DATA is the emulator's connection string verbatim (Endpoint=sb://localhost, no
port: 5672), ADMIN the same with the management port (the administration client of 7.15 parses
UseDevelopmentEmulator but still speaks https to host:port; REQUESTS_CA_BUNDLE trusts the test
certificate). Run by program's TestEmulatorSDKsVerbatim."""
import os

from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.management import ServiceBusAdministrationClient

with ServiceBusAdministrationClient.from_connection_string(os.environ["ADMIN"]) as admin:
    declared = admin.get_queue("queue.1")
    assert declared.max_delivery_count == 3, declared.max_delivery_count
    admin.create_queue("py-admin")

with ServiceBusClient.from_connection_string(os.environ["DATA"]) as client:
    with client.get_queue_sender("py-admin") as sender:
        sender.send_messages(ServiceBusMessage("from python"))
    with client.get_queue_receiver("py-admin", max_wait_time=30) as receiver:
        got = receiver.receive_messages(max_message_count=1, max_wait_time=30)
        assert len(got) == 1 and str(got[0]) == "from python", [str(m) for m in got]
        receiver.complete_message(got[0])
print("all checks passed")
