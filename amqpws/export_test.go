package amqpws

// OpenTunnels is the number of tunnels h serves.
func OpenTunnels(h *Handler) int { return h.open() }
