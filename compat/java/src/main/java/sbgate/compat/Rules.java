package sbgate.compat;

import com.azure.core.http.HttpPipelineCallContext;
import com.azure.core.http.HttpPipelineNextPolicy;
import com.azure.core.http.HttpPipelineNextSyncPolicy;
import com.azure.core.http.HttpPipelinePosition;
import com.azure.core.http.HttpRequest;
import com.azure.core.http.HttpResponse;
import com.azure.core.http.policy.HttpPipelinePolicy;
import com.azure.core.util.UrlBuilder;
import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusRuleManagerClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import com.azure.messaging.servicebus.administration.ServiceBusAdministrationClient;
import com.azure.messaging.servicebus.administration.ServiceBusAdministrationClientBuilder;
import com.azure.messaging.servicebus.administration.models.CorrelationRuleFilter;
import com.azure.messaging.servicebus.administration.models.CreateRuleOptions;
import com.azure.messaging.servicebus.administration.models.EmptyRuleAction;
import com.azure.messaging.servicebus.administration.models.RuleProperties;
import com.azure.messaging.servicebus.administration.models.SqlRuleAction;
import com.azure.messaging.servicebus.administration.models.SqlRuleFilter;
import com.azure.messaging.servicebus.administration.models.TrueRuleFilter;
import com.azure.messaging.servicebus.models.ServiceBusReceiveMode;
import reactor.core.publisher.Mono;

import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.stream.Collectors;

/** Rules through ServiceBusRuleManagerClient ($management of the subscription over AMQP). */
final class Rules {
    private Rules() {
    }

    /**
     * The administration client (REST over https). Its builder keeps only the host of the
     * connection string's endpoint (the requests go to https://{host}, i.e. port 443), so a policy
     * puts the broker's https port back, as an application does for a namespace behind a
     * non-default port.
     */
    static ServiceBusAdministrationClient admin(Env env) {
        return new ServiceBusAdministrationClientBuilder()
            .connectionString(env.adminConn)
            .addPolicy(new ToPort(env.httpsPort))
            .buildClient();
    }

    /** Sends every request to the given port of the host it names. */
    static final class ToPort implements HttpPipelinePolicy {
        private final int port;

        ToPort(int port) {
            this.port = port;
        }

        private void rewrite(HttpRequest request) {
            request.setUrl(UrlBuilder.parse(request.getUrl()).setPort(port).toString());
        }

        @Override
        public Mono<HttpResponse> process(HttpPipelineCallContext context, HttpPipelineNextPolicy next) {
            rewrite(context.getHttpRequest());
            return next.process();
        }

        @Override
        public HttpResponse processSync(HttpPipelineCallContext context, HttpPipelineNextSyncPolicy next) {
            rewrite(context.getHttpRequest());
            return next.processSync();
        }

        @Override
        public HttpPipelinePosition getPipelinePosition() {
            return HttpPipelinePosition.PER_CALL;
        }
    }

    static Map<String, RuleProperties> byName(Iterable<RuleProperties> rules) {
        Map<String, RuleProperties> m = new TreeMap<>();
        for (RuleProperties r : rules) {
            m.put(r.getName(), r);
        }
        return m;
    }

    /**
     * The administration client creates the topic and subscription over https; the rule manager
     * lists the $Default rule, adds a SQL rule with an action and a correlation rule, removes
     * $Default, and the subscription then takes exactly the messages those rules match, the SQL
     * action applied; the REST view of the rules agrees with the AMQP one; a removed rule is gone.
     */
    static void rules(Env env) throws Exception {
        String topic = env.entity("RULES_TOPIC");
        String sub = env.entity("RULES_SUB");
        ServiceBusAdministrationClient admin = admin(env);
        admin.createTopic(topic);
        admin.createSubscription(topic, sub);

        // Rule operations need the Manage right.
        ServiceBusClientBuilder b = Env.client(env.rootConn);
        try (ServiceBusRuleManagerClient rm = b.ruleManager().topicName(topic).subscriptionName(sub).buildClient();
             ServiceBusSenderClient s = b.sender().topicName(topic).buildClient();
             ServiceBusReceiverClient r = b.receiver().topicName(topic).subscriptionName(sub)
                 .receiveMode(ServiceBusReceiveMode.PEEK_LOCK).disableAutoComplete().buildClient()) {
            Map<String, RuleProperties> rules = byName(rm.listRules());
            Check.equal("rules of a new subscription", List.of("$Default"), List.copyOf(rules.keySet()));
            RuleProperties def = rules.get("$Default");
            Check.that(def.getFilter() instanceof TrueRuleFilter, "$Default filter: " + Check.show(def.getFilter()));
            Check.that(def.getAction() == null || def.getAction() instanceof EmptyRuleAction,
                "$Default action: " + Check.show(def.getAction()));

            rm.createRule("red", new CreateRuleOptions(new SqlRuleFilter("color = 'red'"))
                .setAction(new SqlRuleAction("SET processed = 'yes'")));
            CorrelationRuleFilter corr = new CorrelationRuleFilter().setCorrelationId("order-7");
            corr.getProperties().put("region", "eu");
            rm.createRule("corr", new CreateRuleOptions(corr));
            rm.deleteRule("$Default");

            rules = byName(rm.listRules());
            Check.equal("rules after adding two and removing $Default", List.of("corr", "red"),
                List.copyOf(rules.keySet()));
            RuleProperties red = rules.get("red");
            Check.that(red.getFilter() instanceof SqlRuleFilter && !(red.getFilter() instanceof TrueRuleFilter),
                "red filter: " + Check.show(red.getFilter()));
            Check.equal("red filter expression", "color = 'red'", ((SqlRuleFilter) red.getFilter()).getSqlExpression());
            Check.that(red.getAction() instanceof SqlRuleAction, "red action: " + Check.show(red.getAction()));
            Check.equal("red action expression", "SET processed = 'yes'",
                ((SqlRuleAction) red.getAction()).getSqlExpression());
            RuleProperties c = rules.get("corr");
            Check.that(c.getFilter() instanceof CorrelationRuleFilter, "corr filter: " + Check.show(c.getFilter()));
            CorrelationRuleFilter cf = (CorrelationRuleFilter) c.getFilter();
            Check.equal("corr correlation id", "order-7", cf.getCorrelationId());
            Check.equal("corr properties", Map.of("region", "eu"), cf.getProperties());

            // What REST says agrees with what AMQP says.
            Check.equal("rules listed by the administration client",
                new TreeSet<>(rules.keySet()),
                admin.listRules(topic, sub).stream().map(RuleProperties::getName).collect(Collectors.toCollection(TreeSet::new)));

            s.sendMessage(withProperty(new ServiceBusMessage("red").setMessageId("red-1"), "color", "red"));
            s.sendMessage(withProperty(new ServiceBusMessage("blue").setMessageId("blue-1"), "color", "blue"));
            s.sendMessage(withProperty(new ServiceBusMessage("eu").setMessageId("corr-1").setCorrelationId("order-7"),
                "region", "eu"));
            s.sendMessage(withProperty(new ServiceBusMessage("us").setMessageId("corr-2").setCorrelationId("order-7"),
                "region", "us"));
            List<ServiceBusReceivedMessage> got = Env.receive(r, 2, Env.RECEIVE_WAIT);
            Map<String, ServiceBusReceivedMessage> byId = new TreeMap<>();
            for (ServiceBusReceivedMessage m : got) {
                byId.put(m.getMessageId(), m);
                r.complete(m);
            }
            Check.equal("messages the rules let through", new TreeSet<>(List.of("corr-1", "red-1")), byId.keySet());
            Check.sameTyped("property set by the red rule's action", "yes",
                byId.get("red-1").getApplicationProperties().get("processed"));
            Check.equal("property on a message the action did not touch", null,
                byId.get("corr-1").getApplicationProperties().get("processed"));
            Messaging.expectNoMessage(r, "a message no rule matches reached the subscription");

            rm.deleteRule("red");
            Check.equal("rules after removing red", List.of("corr"), List.copyOf(byName(rm.listRules()).keySet()));
        }
    }

    static ServiceBusMessage withProperty(ServiceBusMessage m, String key, Object value) {
        m.getApplicationProperties().put(key, value);
        return m;
    }
}
