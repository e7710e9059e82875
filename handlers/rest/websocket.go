package rest

import (
	"errors"
	"net/http"

	"github.com/sbgate/sbgate/amqpws"
	"github.com/sbgate/sbgate/broker"
)

// AmqpWebSocket serves Config.AMQPWebSocket: the Service Bus SDKs' AMQP-over-WebSockets
// transport. Its refusals (no WebSocket upgrade, no AMQP subprotocol, shutting down) get the
// Service Bus error body like every other error.
func (s *Server) AmqpWebSocket(w http.ResponseWriter, r *http.Request) {
	if s.cfg.AMQPWebSocket == nil {
		s.writeError(w, r, &broker.Error{Code: broker.CodeNotFound, Message: "AMQP over WebSockets is not enabled."})
		return
	}
	var ref *amqpws.RefusedError
	if err := s.cfg.AMQPWebSocket.Serve(w, r); errors.As(err, &ref) {
		code := broker.CodeBadRequest
		if errors.Is(ref, amqpws.ErrClosed) {
			code = broker.CodeUnavailable
		}
		s.writeError(w, r, &broker.Error{Code: code, Message: ref.Message})
	}
}
