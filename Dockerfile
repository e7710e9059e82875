# sbgate images: a static Go binary on a slim base. The default (last) stage, server, runs with
# PostgreSQL in its own container (docker-compose.yml); the emulator stage brings its own.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/sbgate ./cmd/sbgate

# A drop-in for Microsoft's Service Bus emulator (mcr.microsoft.com/azure-messaging/servicebus-emulator):
#   docker build --target emulator -t sbgate-emulator .
# It honours the emulator container's contract: Config.json read from
# /ServiceBus_Emulator/ConfigFiles/Config.json (the emulator's sample when none is mounted), AMQP on
# 5672, management and GET /health on EMULATOR_HTTP_PORT (5300), the connection string
# Endpoint=sb://localhost;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;
# and the log line "Emulator Service is Successfully Up!". ACCEPT_EULA, SQL_SERVER, MSSQL_SA_PASSWORD
# and SQL_WAIT_INTERVAL are accepted and ignored: it keeps its data in its own PostgreSQL, in the
# volume /var/lib/sbgate (as root it runs that server as the postgres user). For development and
# tests only: the key is public. program/container_test.go runs this stage's ENTRYPOINT with its
# ENV as the image would.
FROM debian:bookworm-slim AS emulator
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates curl postgresql-15 \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/sbgate /usr/local/bin/sbgate
COPY nsconfig/testdata/emulator/Config.json /ServiceBus_Emulator/ConfigFiles/Config.json
ENV SBGATE_EMULATOR=true \
    SBGATE_CONFIG=/ServiceBus_Emulator/ConfigFiles/Config.json \
    SBGATE_DATA_DIR=/var/lib/sbgate \
    SBGATE_LISTEN=0.0.0.0:8080 \
    SBGATE_AMQP_LISTEN=0.0.0.0:5672 \
    SBGATE_AMQPS_LISTEN=0.0.0.0:5671 \
    SBGATE_EMULATOR_HTTP_LISTEN=0.0.0.0:5300
VOLUME /var/lib/sbgate
EXPOSE 5672 5300 8080
HEALTHCHECK --interval=5s --timeout=3s --retries=20 CMD curl -fsS "http://127.0.0.1:${EMULATOR_HTTP_PORT:-5300}/health" || exit 1
ENTRYPOINT ["sbgate", "serve"]

# The default image: sbgate with PostgreSQL in its own container (docker-compose.yml).
FROM debian:bookworm-slim AS server
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home /nonexistent sbgate
COPY --from=build /out/sbgate /usr/local/bin/sbgate
USER sbgate
# HTTP, plain AMQP for the Service Bus SDKs, and AMQPS (served only with SBGATE_TLS_CERT).
ENV SBGATE_LISTEN=0.0.0.0:8080 SBGATE_AMQP_LISTEN=0.0.0.0:5672 SBGATE_AMQPS_LISTEN=0.0.0.0:5671
EXPOSE 8080 5672 5671
HEALTHCHECK --interval=5s --timeout=3s --retries=10 CMD curl -fsS http://127.0.0.1:8080/readyz || exit 1
ENTRYPOINT ["sbgate"]
CMD ["serve"]
