package fargate_test

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/infra/awsflock"
	"github.com/ai-flock/ai-flock/tests/capture"
	"github.com/ai-flock/ai-flock/tests/fargate"
)

// machines are the ELF machines of the GOARCHs Fargate runs.
var machines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

func elfMachine(t *testing.T, r io.ReaderAt) elf.Machine {
	t.Helper()
	f, err := elf.NewFile(r)
	if err != nil {
		t.Fatalf("not an ELF binary: %v", err)
	}
	return f.Machine
}

// imageFile reads one file out of an image (through a container created
// from it and never started).
func imageFile(t *testing.T, image, path string) []byte {
	t.Helper()
	ctx := context.Background()
	id, err := engine.CreateContainer(ctx, "", map[string]any{"Image": image, "Labels": map[string]string{fargate.Label: "1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer engine.Remove(ctx, id)
	var buf bytes.Buffer
	if err := engine.Archive(ctx, id, path, &buf); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(&buf)
	if _, err := tr.Next(); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(tr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Images built for the task's architecture, whatever the host: for each
// architecture Fargate runs, the binaries make bin builds are that
// architecture's, agent/Dockerfile copies them by TARGETARCH (which BuildKit
// sets from the platform the stack builds for), and the stack's task
// definitions say the same architecture as that platform (tests/stacks
// checks the declarations for both). The image the replay built for the
// engine's architecture says that architecture and holds its binary.
func TestImagesAreBuiltForTheTaskArchitecture(t *testing.T) {
	need(t)
	root, err := capture.ProjectRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := capture.BuildImageContext(root, "amd64", "arm64"); err != nil {
		t.Fatal(err)
	}
	for _, a := range []awsflock.CPUArchitecture{awsflock.X86_64, awsflock.ARM64} {
		for _, b := range awsflock.ImageBinaries {
			p := filepath.Join(awsflock.BinaryDir(filepath.Join(root, "agent"), a), b)
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			if m := elfMachine(t, f); m != machines[a.GOARCH()] {
				t.Errorf("%s: an %s binary for %s tasks", p, m, a)
			}
			f.Close()
		}
		if a.Platform() != "linux/"+a.GOARCH() {
			t.Errorf("%s tasks are built for %s", a, a.Platform())
		}
		// The Dockerfile picks the binaries by TARGETARCH.
		ctx := context.Background()
		img, err := engine.Build(ctx, filepath.Join(root, "agent"), "Dockerfile", "agent", "flock-fargate/arch-"+a.GOARCH()+":test",
			map[string]string{"BASE": "scratch", "TARGETARCH": a.GOARCH()}, map[string]string{fargate.Label: "1"})
		if err != nil {
			t.Fatal(err)
		}
		if m := elfMachine(t, bytes.NewReader(imageFile(t, img, "/flock-agent"))); m != machines[a.GOARCH()] {
			t.Errorf("the agent image built with TARGETARCH=%s holds an %s binary", a.GOARCH(), m)
		}
		_ = engine.RemoveImage(ctx, img)
	}
	// What the replay runs: the task definitions' architecture, the image's,
	// and its binary's, all the engine's.
	own, err := engine.Arch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, td := range cluster.Model().TaskDefs {
		if !strings.HasSuffix(td.Family, "-agent-1") {
			continue
		}
		if awsflock.CPUArchitecture(td.Arch).GOARCH() != own {
			t.Fatalf("agent-1's task definition says %s; the engine is %s", td.Arch, own)
		}
		_, c := agentTask(t, "agent-1")
		doc, err := engine.Inspect(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		image, _ := doc["Image"].(string)
		idoc, err := engine.InspectImage(context.Background(), image)
		if err != nil {
			t.Fatal(err)
		}
		if idoc["Architecture"] != own {
			t.Errorf("agent-1's image is %v, its task definition %s", idoc["Architecture"], td.Arch)
		}
		if m := elfMachine(t, bytes.NewReader(imageFile(t, image, "/flock-agent"))); m != machines[own] {
			t.Errorf("agent-1's image holds an %s binary for %s tasks", m, td.Arch)
		}
	}
}

// ARM64 images run here only where the engine can run arm64 binaries (a
// binfmt_misc handler for aarch64, such as Debian's qemu-user-static):
// then the agent image built for arm64 runs its tool, hardened as a task. Elsewhere the test
// says why it cannot.
func TestARM64ImageRunsWhereTheHostEmulatesIt(t *testing.T) {
	need(t)
	own, err := engine.Arch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if own != "arm64" {
		handler, err := os.ReadFile("/proc/sys/fs/binfmt_misc/qemu-aarch64")
		if err != nil || !strings.HasPrefix(string(handler), "enabled") {
			t.Skipf("the engine is %s and this host has no enabled binfmt_misc handler for aarch64 (/proc/sys/fs/binfmt_misc/qemu-aarch64: %v): it cannot run an ARM64 task; ARM64 is proven by the declarations (tests/stacks) and the binaries and image above", own, err)
		}
	}
	root, err := capture.ProjectRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := capture.BuildImageContext(root, "arm64"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	img, err := engine.Build(ctx, filepath.Join(root, "agent"), "Dockerfile", "agent", "flock-fargate/arch-arm64:run",
		map[string]string{"BASE": "scratch", "TARGETARCH": "arm64"}, map[string]string{fargate.Label: "1"})
	if err != nil {
		t.Fatal(err)
	}
	defer engine.RemoveImage(ctx, img)
	id, err := engine.CreateContainer(ctx, "", map[string]any{"Image": img, "Cmd": []string{"tool", "echo", "arm64 here"},
		"User": "12345:12345", "Labels": map[string]string{fargate.Label: "1"}, "HostConfig": map[string]any{"ReadonlyRootfs": true, "CapDrop": []string{"ALL"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer engine.Remove(ctx, id)
	if err := engine.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		doc, err := engine.Inspect(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if st, _ := doc["State"].(map[string]any); st["Running"] != true {
			out, _ := engine.Logs(ctx, id, 0)
			if code := fmt.Sprint(st["ExitCode"]); code != "0" || !strings.Contains(out, "arm64 here") {
				t.Fatalf("the arm64 agent binary: exit %s, %q", code, out)
			}
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatal("the arm64 agent binary did not finish in a minute")
}
