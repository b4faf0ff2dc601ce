package echo_test

import (
	"context"
	"fmt"

	"github.com/granary-go/granary/internal/echo"
	"github.com/granary-go/granary/internal/transport"
)

func Example() {
	server, err := echo.Listen("127.0.0.1:0", transport.Options{})
	if err != nil {
		panic(err)
	}
	defer server.Close()
	client, err := echo.Dial(context.Background(), server.Addr().String(), transport.Options{})
	if err != nil {
		panic(err)
	}
	defer client.Close()

	reply, err := client.Call([]byte("ping"))
	fmt.Println(string(reply), err)
	// Output: ping <nil>
}
