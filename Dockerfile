# sbgate image: a static Go binary on a slim base. PostgreSQL runs in its own container
# (docker-compose.yml), so the embedded server is not needed here.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/sbgate ./cmd/sbgate

FROM debian:bookworm-slim
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
