// Command pulumi-language-python is a minimal Pulumi language host for Python programs and
// policy packs. It implements what `pulumi preview/up/destroy` and `--policy-pack` need:
// Run (via the SDK's pulumi-language-python-exec script, which must sit beside this binary),
// RunPlugin (policy analyzers via `python -m pulumi.policy`), GetPluginInfo and empty
// dependency answers (plugins are installed ahead of time, never downloaded).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/grpc"
	pbempty "google.golang.org/protobuf/types/known/emptypb"

	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
)

// version is stamped by the build script with the pulumi release the SDK pins.
var version = "0.0.0-dev"

// userActionableExit is the executor's exit code for "an error was already shown".
const userActionableExit = 32

type host struct {
	pulumirpc.UnimplementedLanguageRuntimeServer
	engine string
}

func main() {
	// The engine may pass logging flags before the engine address; the address comes last.
	var engine string
	for _, a := range os.Args[1:] {
		if !strings.HasPrefix(a, "-") {
			engine = a
		}
	}
	h := &host{engine: engine}
	handle, err := rpcutil.ServeWithOptions(rpcutil.ServeOptions{
		Init: func(srv *grpc.Server) error {
			pulumirpc.RegisterLanguageRuntimeServer(srv, h)
			return nil
		},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "fatal: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("%d\n", handle.Port)
	if err := <-handle.Done; err != nil {
		fmt.Fprintf(os.Stderr, "fatal: %v\n", err)
		os.Exit(1)
	}
}

// python picks the interpreter: the program's `virtualenv` runtime option, then
// PULUMI_PYTHON_CMD, then python3.
func python(info *pulumirpc.ProgramInfo) string {
	if info != nil && info.GetOptions() != nil {
		if v, ok := info.GetOptions().GetFields()["virtualenv"]; ok && v.GetStringValue() != "" {
			venv := v.GetStringValue()
			if !filepath.IsAbs(venv) {
				venv = filepath.Join(info.GetRootDirectory(), venv)
			}
			return filepath.Join(venv, "bin", "python")
		}
	}
	if cmd := os.Getenv("PULUMI_PYTHON_CMD"); cmd != "" {
		return cmd
	}
	return "python3"
}

func (h *host) Handshake(_ context.Context, req *pulumirpc.LanguageHandshakeRequest) (*pulumirpc.LanguageHandshakeResponse, error) {
	if req.GetEngineAddress() != "" {
		h.engine = req.GetEngineAddress()
	}
	return &pulumirpc.LanguageHandshakeResponse{}, nil
}

func (h *host) GetPluginInfo(context.Context, *pbempty.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: version}, nil
}

func (h *host) GetRequiredPlugins(context.Context, *pulumirpc.GetRequiredPluginsRequest) (*pulumirpc.GetRequiredPluginsResponse, error) {
	return &pulumirpc.GetRequiredPluginsResponse{}, nil
}

func (h *host) GetRequiredPackages(context.Context, *pulumirpc.GetRequiredPackagesRequest) (*pulumirpc.GetRequiredPackagesResponse, error) {
	return &pulumirpc.GetRequiredPackagesResponse{}, nil
}

func (h *host) GetProgramDependencies(context.Context, *pulumirpc.GetProgramDependenciesRequest) (*pulumirpc.GetProgramDependenciesResponse, error) {
	return &pulumirpc.GetProgramDependenciesResponse{}, nil
}

func (h *host) About(context.Context, *pulumirpc.AboutRequest) (*pulumirpc.AboutResponse, error) {
	return &pulumirpc.AboutResponse{Executable: "python3", Version: version}, nil
}

func (h *host) InstallDependencies(_ *pulumirpc.InstallDependenciesRequest, _ grpc.ServerStreamingServer[pulumirpc.InstallDependenciesResponse]) error {
	// Dependencies are installed by the project's own setup script before the engine runs.
	return nil
}

func (h *host) Run(ctx context.Context, req *pulumirpc.RunRequest) (*pulumirpc.RunResponse, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	execScript := filepath.Join(filepath.Dir(self), "pulumi-language-python-exec")
	if _, err := os.Stat(execScript); err != nil {
		return nil, fmt.Errorf("missing executor %s: %w", execScript, err)
	}
	info := req.GetInfo()
	program := req.GetProgram()
	if info != nil && info.GetProgramDirectory() != "" {
		program = info.GetProgramDirectory()
	}
	args := []string{"-u", execScript,
		"--monitor", req.GetMonitorAddress(),
		"--engine", h.engine,
		"--project", req.GetProject(),
		"--stack", req.GetStack(),
		"--pwd", req.GetPwd(),
		"--dry_run", strconv.FormatBool(req.GetDryRun()),
		"--parallel", strconv.Itoa(int(req.GetParallel())),
		"--organization", req.GetOrganization(),
	}
	if info != nil && info.GetRootDirectory() != "" {
		args = append(args, "--root_directory", info.GetRootDirectory())
	}
	args = append(args, program)
	args = append(args, req.GetArgs()...)

	cfg, err := json.Marshal(req.GetConfig())
	if err != nil {
		return nil, err
	}
	secretKeys := req.GetConfigSecretKeys()
	if secretKeys == nil {
		secretKeys = []string{}
	}
	keys, err := json.Marshal(secretKeys)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, python(info), args...)
	cmd.Dir = req.GetPwd()
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "PULUMI_CONFIG="+string(cfg), "PULUMI_CONFIG_SECRET_KEYS="+string(keys))
	if err := cmd.Run(); err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			if exitErr.ExitCode() == userActionableExit {
				return &pulumirpc.RunResponse{Bail: true}, nil
			}
			return &pulumirpc.RunResponse{Error: fmt.Sprintf("python exited with %d", exitErr.ExitCode())}, nil
		}
		return &pulumirpc.RunResponse{Error: err.Error()}, nil
	}
	return &pulumirpc.RunResponse{}, nil
}

// streamWriter forwards a child's output to the engine as RunPlugin responses.
type streamWriter struct {
	mu     *sync.Mutex
	server grpc.ServerStreamingServer[pulumirpc.RunPluginResponse]
	stderr bool
}

func (w streamWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := append([]byte(nil), p...)
	var resp pulumirpc.RunPluginResponse
	if w.stderr {
		resp.Output = &pulumirpc.RunPluginResponse_Stderr{Stderr: b}
	} else {
		resp.Output = &pulumirpc.RunPluginResponse_Stdout{Stdout: b}
	}
	if err := w.server.Send(&resp); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (h *host) RunPlugin(req *pulumirpc.RunPluginRequest, server grpc.ServerStreamingServer[pulumirpc.RunPluginResponse]) error {
	var module string
	switch req.GetKind() {
	case "analyzer":
		module = "pulumi.policy"
	case "resource", "":
		module = "pulumi.dynamic"
	default:
		return fmt.Errorf("unsupported plugin kind %q", req.GetKind())
	}
	program := req.GetProgram()
	if info := req.GetInfo(); info != nil && info.GetProgramDirectory() != "" {
		program = info.GetProgramDirectory()
	}
	args := []string{"-u", "-m", module}
	args = append(args, req.GetArgs()...)
	if module == "pulumi.policy" {
		// pulumi.policy expects <engine address> <pack dir>; the engine passes the address in Args.
		args = append(args, program)
	}
	cmd := exec.Command(python(req.GetInfo()), args...)
	cmd.Dir = req.GetPwd()
	cmd.Env = append(os.Environ(), req.GetEnv()...)
	mu := &sync.Mutex{}
	cmd.Stdout = streamWriter{mu: mu, server: server}
	cmd.Stderr = streamWriter{mu: mu, server: server, stderr: true}
	code := 0
	if err := cmd.Run(); err != nil {
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) {
			return err
		}
		code = exitErr.ExitCode()
	}
	return server.Send(&pulumirpc.RunPluginResponse{Output: &pulumirpc.RunPluginResponse_Exitcode{Exitcode: int32(code)}})
}
