package silo_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/silo"
)

// A port outside 0..65535, or not a number, is refused where Options are
// checked, not when Start tries to listen or a call tries to dial; a
// client also refuses port 0, which it cannot dial.
func TestValidateRefusesBadPorts(t *testing.T) {
	_, err := client.New(client.Options{Gateways: []string{"127.0.0.1:0"}}, client.WithLogger(quiet))
	assert.ErrorContains(t, err, "Gateway", "a client cannot dial port 0")
	for _, addr := range []string{"127.0.0.1:99999", "127.0.0.1:-1", "127.0.0.1:http", "127.0.0.1:"} {
		_, err := silo.New(silo.Options{GatewayAddress: addr}, silo.WithLogger(quiet))
		assert.ErrorContains(t, err, "GatewayAddress", "silo gateway %q", addr)
		_, err = client.New(client.Options{Gateways: []string{addr}}, client.WithLogger(quiet))
		assert.ErrorContains(t, err, "Gateway", "client gateway %q", addr)
	}
}
