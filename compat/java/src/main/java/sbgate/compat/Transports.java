package sbgate.compat;

/** The same send and receive over the other transports the SDK has. */
final class Transports {
    private Transports() {
    }

    /**
     * AMQP over WebSockets (AmqpTransportType.AMQP_WEB_SOCKETS): the SDK always wraps it in TLS
     * (WebSocketsConnectionHandler ignores UseDevelopmentEmulator), asks for /$servicebus/websocket
     * with subprotocol AMQPWSB10 and offers max-frame-size 4096. It dials port 443 unless the
     * connection string's Endpoint names a port (ServiceBusClientBuilder.getConnectionOptions uses
     * the endpoint's port when there is one), so the Endpoint here is the broker's https port, and
     * the broker's certificate is trusted through javax.net.ssl.trustStore.
     */
    static void websockets(Env env) throws Exception {
        Messaging.sendAndReceive(env.webSocketsClient(), env.entity("WS"), "websockets");
    }

    /** AMQP over TLS on the broker's AMQPS port, no emulator flag: what an application uses in Azure. */
    static void amqps(Env env) throws Exception {
        Messaging.sendAndReceive(Env.client(env.tlsConn), env.entity("TLS"), "amqps");
    }
}
