package sbgate.compat;

import com.azure.core.amqp.AmqpRetryMode;
import com.azure.core.amqp.AmqpRetryOptions;
import com.azure.core.amqp.AmqpTransportType;
import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;

import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;

/**
 * What the Go test hands the scenarios: connection strings for each key and transport, the
 * broker's https port and certificate, and the entity names (SB_ENTITY_*), plus the client
 * settings every scenario shares.
 */
final class Env {
    /** SendListen key, plain AMQP: Endpoint=sb://127.0.0.1:port with UseDevelopmentEmulator=true. */
    final String conn;
    /** RootManageSharedAccessKey (Manage), plain AMQP. */
    final String rootConn;
    /** ListenOnly key, plain AMQP. */
    final String listenOnlyConn;
    /** SendListen key name with a key that is not its key, plain AMQP. */
    final String wrongKeyConn;
    /** SendListen key, Endpoint = the broker's https port, no emulator flag (AMQP over WebSockets over TLS). */
    final String webSocketsConn;
    /** SendListen key, Endpoint = the broker's AMQPS port, no emulator flag (AMQP over TLS). */
    final String tlsConn;
    /** Root key, Endpoint = the broker's https port, for the administration client. */
    final String adminConn;
    /** The https port of the broker's REST API. */
    final int httpsPort;
    /** The PEM certificate the broker's TLS listeners present. */
    final String caFile;

    private Env() {
        conn = required("SB_CONN");
        rootConn = required("SB_CONN_ROOT");
        listenOnlyConn = required("SB_CONN_LISTEN_ONLY");
        wrongKeyConn = required("SB_CONN_WRONG_KEY");
        webSocketsConn = required("SB_CONN_WEBSOCKETS");
        tlsConn = required("SB_CONN_TLS");
        adminConn = required("SB_CONN_ADMIN");
        httpsPort = Integer.parseInt(required("SB_HTTPS_PORT"));
        caFile = required("SB_CA_FILE");
    }

    static Env fromEnvironment() {
        return new Env();
    }

    private static String required(String name) {
        String v = System.getenv(name);
        if (v == null || v.isEmpty()) {
            throw new IllegalStateException("environment variable " + name + " is not set (compat/java_test.go sets it)");
        }
        return v;
    }

    /** The entity the Go test created for a scenario: SB_ENTITY_<key>. */
    String entity(String key) {
        return required("SB_ENTITY_" + key);
    }

    /**
     * Makes the broker's test certificate the JVM's trust store, the way an application trusts a
     * private CA: proton-j's TLS (SSLContext.getDefault()) and reactor-netty's https (the default
     * TrustManagerFactory) both read javax.net.ssl.trustStore. Java 17 takes no PEM trust store,
     * so the certificate goes into a PKCS12 file first.
     */
    void trustCaFile() throws Exception {
        KeyStore ks = KeyStore.getInstance("PKCS12");
        ks.load(null, null);
        try (InputStream in = new FileInputStream(caFile)) {
            int i = 0;
            for (Certificate c : CertificateFactory.getInstance("X.509").generateCertificates(in)) {
                ks.setCertificateEntry("sbgate-test-" + i++, c);
            }
        }
        Path store = Files.createTempFile("sbgate-truststore", ".p12");
        store.toFile().deleteOnExit();
        char[] password = "sbgate-test".toCharArray();
        try (OutputStream o = new FileOutputStream(store.toFile())) {
            ks.store(o, password);
        }
        System.setProperty("javax.net.ssl.trustStore", store.toString());
        System.setProperty("javax.net.ssl.trustStorePassword", new String(password));
        System.setProperty("javax.net.ssl.trustStoreType", "PKCS12");
    }

    /**
     * Retries kept short so that a refusal ends a scenario in seconds rather than minutes (the
     * defaults are 3 retries of up to 60 s each); one retry still lets a transient failure pass.
     * azure-core-amqp's RetryUtil adds 4 s (SERVER_BUSY_WAIT_TIME) to the delay, and reactor's
     * RetryBackoffSpec fails a retry whose maximum is below that ("bound must be greater than
     * origin"), so the maximum delay is above it.
     */
    static AmqpRetryOptions retry() {
        return new AmqpRetryOptions()
            .setMode(AmqpRetryMode.EXPONENTIAL)
            .setMaxRetries(1)
            .setDelay(Duration.ofMillis(100))
            .setMaxDelay(Duration.ofSeconds(8))
            .setTryTimeout(Duration.ofSeconds(20));
    }

    /** A client builder (its own connection) on the SendListen key over plain AMQP. */
    ServiceBusClientBuilder client() {
        return client(conn);
    }

    /** A client builder (its own connection) for a connection string. */
    static ServiceBusClientBuilder client(String connectionString) {
        return new ServiceBusClientBuilder().connectionString(connectionString).retryOptions(retry());
    }

    /** A client builder on AMQP over WebSockets to the broker's https port. */
    ServiceBusClientBuilder webSocketsClient() {
        return client(webSocketsConn).transportType(AmqpTransportType.AMQP_WEB_SOCKETS);
    }

    /**
     * Receives until n messages arrived or within has passed; each call of the SDK waits at most
     * what is left.
     */
    static List<ServiceBusReceivedMessage> receive(ServiceBusReceiverClient r, int n, Duration within) {
        List<ServiceBusReceivedMessage> got = new ArrayList<>();
        Instant deadline = Instant.now().plus(within);
        while (got.size() < n) {
            Duration left = Duration.between(Instant.now(), deadline);
            if (left.isNegative() || left.isZero()) {
                break;
            }
            for (ServiceBusReceivedMessage m : r.receiveMessages(n - got.size(), left)) {
                got.add(m);
            }
        }
        return got;
    }

    /** Receives exactly one message within the time, or fails saying what was waited for. */
    static ServiceBusReceivedMessage receiveOne(ServiceBusReceiverClient r, Duration within, String what) {
        List<ServiceBusReceivedMessage> got = receive(r, 1, within);
        Check.that(got.size() == 1, "no message received within " + within.toSeconds() + " s: " + what);
        return got.get(0);
    }

    /** How long a scenario waits for a message it sent. */
    static final Duration RECEIVE_WAIT = Duration.ofSeconds(20);

    /** How long a scenario waits to see that no message comes. */
    static final Duration ABSENCE_WAIT = Duration.ofSeconds(3);
}
