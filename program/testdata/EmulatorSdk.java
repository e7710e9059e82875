// azure-messaging-servicebus (7.17.19, compat/java's) against sbgate in emulator mode, with the
// emulator's connection string verbatim: Endpoint=sb://localhost has no port, and
// UseDevelopmentEmulator=true makes the client dial plain AMQP on 5672. Its administration client,
// given the same string, speaks https to the Endpoint's host alone (port 443, whatever the
// Endpoint's port): the test serves that port with -mux-listen and trusts its certificate.
// Run by program's TestEmulatorSDKsVerbatim, in Java's single-file source mode.
import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.administration.ServiceBusAdministrationClient;
import com.azure.messaging.servicebus.administration.ServiceBusAdministrationClientBuilder;
import com.azure.messaging.servicebus.administration.models.QueueProperties;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import com.azure.messaging.servicebus.models.ServiceBusReceiveMode;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

public class EmulatorSdk {
    public static void main(String[] args) {
        String data = System.getenv("DATA");
        ServiceBusAdministrationClient admin = new ServiceBusAdministrationClientBuilder().connectionString(data).buildClient();
        QueueProperties q = admin.getQueue("queue.1");
        if (q.getMaxDeliveryCount() != 3) {
            throw new IllegalStateException("queue.1 from Config.json has MaxDeliveryCount " + q.getMaxDeliveryCount());
        }
        admin.createQueue("java-admin");
        if (!admin.getQueueExists("java-admin")) {
            throw new IllegalStateException("java-admin was not created");
        }
        admin.deleteQueue("java-admin");
        ServiceBusSenderClient sender = new ServiceBusClientBuilder().connectionString(data)
            .sender().queueName("queue.1").buildClient();
        sender.sendMessage(new ServiceBusMessage("from java"));
        sender.close();
        ServiceBusReceiverClient receiver = new ServiceBusClientBuilder().connectionString(data)
            .receiver().queueName("queue.1").receiveMode(ServiceBusReceiveMode.RECEIVE_AND_DELETE).buildClient();
        List<String> got = new ArrayList<>();
        for (ServiceBusReceivedMessage m : receiver.receiveMessages(1, Duration.ofSeconds(30))) {
            got.add(m.getBody().toString());
        }
        receiver.close();
        if (got.size() != 1 || !got.get(0).equals("from java")) {
            throw new IllegalStateException("received " + got);
        }
        System.out.println("all checks passed");
        System.exit(0);
    }
}
