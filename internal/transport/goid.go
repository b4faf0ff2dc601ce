package transport

import (
	"bytes"
	"runtime"
	"strconv"
)

// goroutineID returns the running goroutine's id, parsed from the first line of
// its stack trace ("goroutine 42 [running]:"). Only Close and the reader's
// start use it, to detect a Close from inside a handler callback.
func goroutineID() uint64 {
	var buf [64]byte
	line := buf[:runtime.Stack(buf[:], false)]
	line = bytes.TrimPrefix(line, []byte("goroutine "))
	if i := bytes.IndexByte(line, ' '); i >= 0 {
		line = line[:i]
	}
	id, _ := strconv.ParseUint(string(line), 10, 64)
	return id
}
