# sbgate — a newcomer needs two targets: `make run` and `make test`. Both install what is
# missing first with the OS package manager: PostgreSQL server binaries; for the tests also gcc
# (race detector) and Node.js with the real Service Bus clients the compatibility tests run.

GO      ?= go
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_GET := DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get

.PHONY: run test fuzz build generate check deps postgres gcc node compat-clients chromium bench bench-peers rabbitmq clean netns

run: postgres
	$(GO) run ./cmd/sbgate

test: postgres gcc compat-clients chromium java-clients python-clients netns
	$(GO) test -race -timeout 12m ./...
	@$(MAKE) --no-print-directory fuzz

# fuzz runs every fuzz target (func FuzzX in a _test.go file) for FUZZTIME each, one at a time
# since -fuzz takes one target; about 2 s × 15 targets plus builds, under a minute. The committed corpus in
# <pkg>/testdata/fuzz/FuzzX/ also runs with every plain `go test`; a failing input the fuzzer
# finds is written there, to be committed with the fix. The targets are pure parsers: the database
# URL only keeps dbtest.Main (handlers' TestMain) from starting a PostgreSQL in every fuzz worker,
# and points nowhere, so a target that did need the database would fail, not pass. Go 1.26's
# coordinator can end a clean run with a bare "context deadline exceeded" (go.dev/issue/75804,
# fixed in Go 1.27): that, with no failing input written, is reported and not counted.
FUZZTIME ?= 2s
fuzz:
	@log=$$(mktemp); trap 'rm -f $$log' EXIT; \
	for f in $$(grep -l '^func Fuzz' $$(find . -name '*_test.go' -not -path './compat/*' | sort)); do \
		dir=$$(dirname $$f); \
		for t in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$f); do \
			echo "fuzz $$dir $$t ($(FUZZTIME))"; \
			before=$$(ls $$dir/testdata/fuzz/$$t 2>/dev/null | wc -l); \
			SBGATE_TEST_DATABASE_URL=postgres://fuzz-targets-use-no-database.invalid/ \
				$(GO) test -run='^$$' -fuzz="^$$t\$$" -fuzztime=$(FUZZTIME) $$dir >$$log 2>&1 && continue; \
			after=$$(ls $$dir/testdata/fuzz/$$t 2>/dev/null | wc -l); \
			if [ "$$before" = "$$after" ] && grep -q '^    context deadline exceeded$$' $$log && ! grep -q 'failure while testing seed corpus' $$log; then \
				echo "  (go.dev/issue/75804: the run ended with a spurious deadline error, no failing input)"; continue; \
			fi; \
			cat $$log; exit 1; \
		done; \
	done

build:
	$(GO) build -o bin/sbgate ./cmd/sbgate

generate:
	$(GO) generate ./...

# bench prints the whole speed table in one command: it builds sbgate, starts 2 gateways
# (`sbgate serve`, a process each) on a fresh embedded PostgreSQL in a temporary directory,
# measures PostgreSQL alone (the baseline), then every operation at 1, 16, 64 and 256 clients and
# every scenario at 64, and prints msgs/s, p50, p99 and each row's ratio to its baseline. The
# clients go through the first gateway; the second serves the wake scenario's receivers on
# another gateway (two gateway processes sharing one machine's cores measure that sharing, not
# the broker). It removes everything it started afterwards, also on Ctrl-C. It takes about 20
# minutes on our 2-core machine; BENCH_FLAGS adds flags (BENCH_FLAGS='-o json' for machine-readable results). To drive
# gateways that are already running: bin/sbgate bench -connection-string ... -database-url ...
bench: build postgres
	SBGATE_CONNECTION_STRING= ./bin/sbgate bench -gateways 2 -load-gateways 1 -ops all -clients 1,16,64,256 -scenario-clients 64 -duration 10s $(BENCH_FLAGS)

# bench-peers puts sbgate beside RabbitMQ on this machine, one after the other (not part of make
# test: it installs and runs a broker). It installs rabbitmq-server with apt when missing (Debian
# 12: 3.10), starts it unless one already runs, measures RabbitMQ's windowed publish (confirms, 100
# unconfirmed a client) and its consume + ack with prefetch 100 on a durable classic queue of
# persistent messages (sbgate bench rabbitmq), and stops the broker it started; then it measures
# sbgate's AMQP send and peek-lock + complete at prefetch 20 and 100 (sbgate bench: a gateway on
# a fresh embedded PostgreSQL, with its baseline), and prints the two side by side with each
# broker's CPU per message (sbgate bench compare). 64 clients, 10 s phases, about 3 minutes;
# PEERS_FLAGS adds flags to both runs (PEERS_FLAGS='-duration 20s').
PEERS_CLIENTS  ?= 64
PEERS_DURATION ?= 10s
bench-peers: build postgres rabbitmq
	@dir=$$(mktemp -d); started=; \
	stop() { [ -z "$$started" ] || $(SUDO) rabbitmqctl shutdown >/dev/null 2>&1; started=; }; \
	trap 'stop; rm -rf $$dir' EXIT; \
	if $(SUDO) rabbitmq-diagnostics -q ping >/dev/null 2>&1; then \
		echo "RabbitMQ already runs: measuring it, and leaving it running"; \
	else \
		echo "Starting RabbitMQ (its log in $$dir/rabbitmq.log)..."; \
		$(SUDO) sh -c "rabbitmq-server >$$dir/rabbitmq.log 2>&1 &"; started=1; \
		for i in $$(seq 120); do $(SUDO) rabbitmq-diagnostics -q ping >/dev/null 2>&1 && break; sleep 0.5; done; \
		$(SUDO) rabbitmqctl -q await_startup >/dev/null || { cat $$dir/rabbitmq.log; exit 1; }; \
	fi; \
	pid=$$($(SUDO) rabbitmqctl -q eval 'list_to_integer(os:getpid()).' | tail -1); \
	version=$$($(SUDO) rabbitmqctl -q version | tail -1); \
	./bin/sbgate bench rabbitmq -pids "$$pid" -version "RabbitMQ $$version" -clients $(PEERS_CLIENTS) -duration $(PEERS_DURATION) \
		-window 100 -prefetch 100 -o json $(PEERS_FLAGS) >$$dir/rabbitmq.json || exit 1; \
	stop; \
	SBGATE_CONNECTION_STRING= ./bin/sbgate bench -gateways 1 -ops amqp-send,amqp-peek-lock -amqp-prefetch 20,100 \
		-clients $(PEERS_CLIENTS) -duration $(PEERS_DURATION) -o json $(PEERS_FLAGS) >$$dir/sbgate.json || exit 1; \
	./bin/sbgate bench compare $$dir/rabbitmq.json $$dir/sbgate.json

# rabbitmq makes sure RabbitMQ is installed, for make bench-peers.
rabbitmq:
	@if command -v rabbitmq-server >/dev/null 2>&1 || [ -x /usr/sbin/rabbitmq-server ]; then :; \
	elif command -v apt-get >/dev/null 2>&1; then \
		echo "Installing RabbitMQ for make bench-peers (apt-get install rabbitmq-server)..."; \
		$(APT_GET) update -qq && $(APT_GET) install -y -qq rabbitmq-server >/dev/null; \
	else \
		echo "RabbitMQ not found: install rabbitmq-server (make bench-peers runs it beside sbgate)." >&2; exit 1; \
	fi

# check is what CI adds to the tests: generated code (the API's; store's records, statements and
# sqlc queries, all *.gen.go) and go.mod must be up to date, and go vet and staticcheck (pinned
# in go.mod as a tool; staticcheck.conf says which check is off and why) must be clean. sqlc,
# which generates store/internal/sqlcdb, is pinned in a module of its own (tools/sqlc/go.mod),
# tidied here too; a generated file not yet committed fails the check as one that differs.
check:
	$(GO) generate ./...
	$(GO) mod tidy
	cd tools/sqlc && $(GO) mod tidy
	git diff --exit-code -- api go.mod go.sum tools '*.gen.go'
	test -z "$$(git ls-files --others --exclude-standard -- api '*.gen.go')"
	test -z "$$(gofmt -l $$(git ls-files '*.go'))"
	$(GO) vet ./...
	$(GO) tool staticcheck ./...

deps: postgres gcc compat-clients chromium java-clients python-clients netns

# netns makes sure unshare and ip are there: the emulator-mode tests run in a network namespace
# of their own, where the emulator's fixed ports (5672, 5300) are free whatever the machine runs
# (without them they use the machine's ports, and fail if those are taken).
netns:
	@if command -v unshare >/dev/null 2>&1 && command -v ip >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1; then \
		echo "Installing unshare and ip for the emulator-mode tests (apt-get install util-linux iproute2)..."; \
		$(APT_GET) update -qq && $(APT_GET) install -y -qq util-linux iproute2 >/dev/null; \
	fi

# chromium is the headless browser the console tests (TestConsole*) drive; they fail without it.
chromium:
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || command -v google-chrome >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1; then \
		echo "Installing Chromium for the console tests (apt-get install chromium)..."; \
		$(APT_GET) update -qq && $(APT_GET) install -y -qq chromium >/dev/null; \
	else \
		echo "Chromium not found: install chromium (the console tests drive it headless)." >&2; exit 1; \
	fi

# postgres makes sure the PostgreSQL server binaries (initdb, postgres) are installed.
postgres:
	@if command -v pg_config >/dev/null 2>&1 && [ -x "$$(pg_config --bindir)/initdb" ] && [ -x "$$(pg_config --bindir)/postgres" ]; then :; \
	elif ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then :; \
	elif command -v initdb >/dev/null 2>&1 && command -v postgres >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1; then \
		echo "Installing the PostgreSQL server binaries (apt-get install postgresql)..."; \
		$(APT_GET) update -qq && $(APT_GET) install -y -qq postgresql >/dev/null; \
	else \
		echo "PostgreSQL server binaries not found: install PostgreSQL (initdb and postgres), or set DATABASE_URL." >&2; exit 1; \
	fi

# gcc is needed by the race detector (cgo).
gcc:
	@if command -v gcc >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1; then \
		echo "Installing gcc for the race detector (apt-get install gcc libc6-dev)..."; \
		$(APT_GET) update -qq && $(APT_GET) install -y -qq gcc libc6-dev >/dev/null; \
	else \
		echo "gcc not found: the race detector needs a C compiler." >&2; exit 1; \
	fi

# node makes sure Node.js and npm are installed, for the client compatibility tests.
node:
	@if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1; then \
		echo "Installing Node.js for the client compatibility tests (apt-get install nodejs npm)..."; \
		$(APT_GET) update -qq && $(APT_GET) install -y -qq nodejs npm >/dev/null; \
	else \
		echo "Node.js not found: the client compatibility tests (compat/) need node and npm." >&2; exit 1; \
	fi

# compat-clients installs the pinned client libraries compat/ runs against sbgate.
compat-clients: node
	@for d in compat/*/; do \
		[ -f $$d/package-lock.json ] || continue; \
		[ -d $$d/node_modules ] || npm ci --prefix $$d --no-audit --no-fund --loglevel=error || exit 1; \
	done

# java-clients installs a JDK and Maven when missing and resolves the Java client's pinned Maven
# dependencies (compat/java/pom.xml) into ~/.m2, which persists between runs, writing
# compat/java/target/classpath.txt; compat/java_test.go compiles and runs its scenarios with that
# class path, with no Maven and no download. It resolves again only when pom.xml changed or a jar
# the class path names is gone.
JAVA_CLASSPATH := $(CURDIR)/compat/java/target/classpath.txt
java-clients:
	@if command -v javac >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1; then \
		echo "Installing Java 17 and Maven for the Java client tests (apt-get install openjdk-17-jdk-headless maven)..."; \
		$(APT_GET) update -qq && $(APT_GET) install -y -qq openjdk-17-jdk-headless maven >/dev/null; \
	else \
		echo "javac or mvn not found: the Java client tests (compat/java) need a JDK 17 and Maven." >&2; exit 1; \
	fi
	@cp=$(JAVA_CLASSPATH); \
	if [ -s $$cp ] && [ $$cp -nt compat/java/pom.xml ] && tr ':' '\n' < $$cp | xargs ls >/dev/null 2>&1; then :; \
	else \
		echo "Resolving the Java client's Maven dependencies (compat/java/pom.xml)..."; \
		mvn -B -q -f compat/java/pom.xml dependency:build-classpath -Dmdep.includeScope=runtime \
			-Dmdep.outputFile=$$cp || exit 1; \
	fi

# python-clients installs the two Python stacks compat/python_test.go runs against sbgate:
# Debian's azure-servicebus 7.8.2 over uAMQP 1.5.3 (python3-azure, python3-uamqp) for Debian's
# /usr/bin/python3, and the virtualenv compat/python/.venv (python3-venv) with the PyPI
# azure-servicebus over its pure-Python AMQP, pinned with hashes in compat/python/requirements.txt.
# The virtualenv is made again only when requirements.txt changes (it keeps a copy); pip's cache
# keeps what was downloaded once.
PY_VENV := compat/python/.venv
.PHONY: python-clients
python-clients:
	@missing=; \
	/usr/bin/python3 -c 'import azure.servicebus, uamqp' 2>/dev/null || missing="$$missing python3-azure python3-uamqp"; \
	/usr/bin/python3 -c 'import ensurepip' 2>/dev/null || missing="$$missing python3-venv"; \
	if [ -z "$$missing" ]; then :; \
	elif command -v apt-get >/dev/null 2>&1; then \
		echo "Installing the Python clients for the compatibility tests (apt-get install$$missing)..."; \
		$(APT_GET) update -qq && $(APT_GET) install -y -qq $$missing >/dev/null || exit 1; \
	else \
		echo "Debian's$$missing not found: the Python compatibility tests (compat/python_test.go) need them." >&2; exit 1; \
	fi
	@if ! cmp -s compat/python/requirements.txt $(PY_VENV)/requirements.txt; then \
		echo "Creating $(PY_VENV) from compat/python/requirements.txt..."; \
		rm -rf $(PY_VENV) && /usr/bin/python3 -m venv $(PY_VENV) && \
		$(PY_VENV)/bin/pip install -q --disable-pip-version-check --require-hashes -r compat/python/requirements.txt && \
		cp compat/python/requirements.txt $(PY_VENV)/requirements.txt || { rm -rf $(PY_VENV); exit 1; }; \
	fi

clean:
	rm -rf bin compat/*/node_modules
