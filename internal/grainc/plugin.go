package grainc

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/pluginpb"
)

// ProtocGenGoEnv names the environment variable that, when set, holds the
// path of a protoc-gen-go binary to run instead of building one with the go
// command: tests set it to build the plugin once, not once per generation.
const ProtocGenGoEnv = "GRANARYGEN_PROTOC_GEN_GO"

// ProtocGenGo returns how protoc-gen-go is run: as a protoc plugin, by the
// go command, at the version of google.golang.org/protobuf that the main
// module requires, or as the binary ProtocGenGoEnv names. protoc-gen-go's
// generator is internal to the protobuf module, so the plugin protocol is
// the only public way to it; the go command caches the built plugin.
func ProtocGenGo() []string {
	if bin := os.Getenv(ProtocGenGoEnv); bin != "" {
		return []string{bin}
	}
	return []string{"go", "run", protocGenGoPackage}
}

const protocGenGoPackage = "google.golang.org/protobuf/cmd/protoc-gen-go"

// WithProtocGenGo builds protoc-gen-go once, into a temporary directory, has
// ProtocGenGo return it while run runs, and returns run's result; it is a
// TestMain's wrapper for tests that generate code many times.
func WithProtocGenGo(run func() int) int {
	dir, err := os.MkdirTemp("", "protoc-gen-go")
	if err != nil {
		fmt.Fprintln(os.Stderr, "grainc:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "protoc-gen-go")
	if out, err := exec.Command("go", "build", "-o", bin, protocGenGoPackage).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "grainc: go build %s: %v: %s\n", protocGenGoPackage, err, out)
		return 1
	}
	old, had := os.LookupEnv(ProtocGenGoEnv)
	os.Setenv(ProtocGenGoEnv, bin)
	defer func() {
		if had {
			os.Setenv(ProtocGenGoEnv, old)
		} else {
			os.Unsetenv(ProtocGenGoEnv)
		}
	}()
	return run()
}

// RunPlugin runs a protoc plugin on req, as protoc would, and returns its
// response; a response that reports an error is returned as one.
func RunPlugin(command []string, req *pluginpb.CodeGeneratorRequest) (*pluginpb.CodeGeneratorResponse, error) {
	in, err := proto.Marshal(req)
	if err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("grainc: %s: %w: %s", strings.Join(command, " "), err, stderr.String())
	}
	resp := new(pluginpb.CodeGeneratorResponse)
	if err := proto.Unmarshal(stdout.Bytes(), resp); err != nil {
		return nil, fmt.Errorf("grainc: %s: %w", strings.Join(command, " "), err)
	}
	if resp.Error != nil {
		return nil, fmt.Errorf("grainc: %s: %s", strings.Join(command, " "), resp.GetError())
	}
	return resp, nil
}
