package integration

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/internal/testutil"
)

func init() {
	faults = append(faults, fault{name: "disk-full", needsLab: true, inject: diskFull})
}

// diskFull moves a shard leader's data directory onto a filesystem of
// its own, a tmpfs 16 MiB larger than what the directory holds, restarts
// the node on it, and fills it up under load; healing frees the space.
// (needsLab: it needs root to mount, as the network faults do.)
func diskFull(r *faultRun, rng *rand.Rand) func() {
	t := r.t
	p := r.leaderOfSome(rng)
	p.kill()
	held := dirBytes(p.dir)
	moved := p.dir + ".before-tmpfs"
	if err := os.Rename(p.dir, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(p.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	size := held + 16<<20
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", p.dir).CombinedOutput(); err != nil {
		t.Fatalf("mount a tmpfs on %s: %v: %s", p.dir, err, out)
	}
	t.Cleanup(func() {
		// the node may still run: lazily, it goes once its files close
		exec.Command("umount", "-l", p.dir).Run()
	})
	if out, err := exec.Command("cp", "-a", moved+"/.", p.dir).CombinedOutput(); err != nil {
		t.Fatalf("copy %s onto the tmpfs: %v: %s", p.id, err, out)
	}
	p.start(t)
	time.Sleep(2 * time.Second)
	filler := filepath.Join(p.dir, "filler")
	n := fillUp(filler)
	t.Logf("%s (a shard leader) on a %d MiB filesystem, filled up (%d MiB of filler) under load", p.id, size>>20, n>>20)
	// it says so: not ready, naming its data directory
	testutil.EventuallyEvery(t, 10*time.Second, 200*time.Millisecond, func() error {
		res, err := http.Get("http://" + p.api + "/readyz")
		if err != nil {
			return err
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), p.dir) {
			return fmt.Errorf("%s's /readyz with its disk full: %d %s", p.id, res.StatusCode, b)
		}
		t.Logf("%s's /readyz: %s", p.id, strings.TrimSpace(string(b)))
		return nil
	})
	// and leads no shard: a leader that cannot append stops its shard
	testutil.EventuallyEvery(t, 20*time.Second, 200*time.Millisecond, func() error {
		res, err := r.client().cluster.ListShards(r.ctx, req(&cepv1.ListShardsRequest{ClusterWide: true}))
		if err != nil {
			return err
		}
		for _, sh := range res.Msg.Shards {
			if sh.LeaderNodeId == p.id {
				return fmt.Errorf("%s, its disk full, still leads shard %d", p.id, sh.Id)
			}
		}
		return nil
	})
	t.Logf("%s leads no shard", p.id)
	return func() {
		if err := os.Remove(filler); err != nil {
			t.Errorf("free %s's filesystem: %v", p.id, err)
		}
		// what the node said meanwhile (it is not yet required to say
		// anything: the records and the serving afterwards are checked)
		b, _ := os.ReadFile(p.dir + ".log")
		var said []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "no space left") {
				said = append(said, l)
			}
		}
		t.Logf("%s's filesystem freed; %d log lines said 'no space left'%s", p.id, len(said), firstOf(said))
	}
}

func firstOf(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	return ", the first: " + lines[0]
}

// fillUp writes path until its filesystem has no space left and returns
// how much it wrote.
func fillUp(path string) int64 {
	f, err := os.Create(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	chunk := bytes.Repeat([]byte{0xA5}, 1<<20)
	var n int64
	for len(chunk) >= 4096 {
		k, err := f.Write(chunk)
		n += int64(k)
		switch {
		case errors.Is(err, syscall.ENOSPC):
			chunk = chunk[:len(chunk)/2] // the last blocks, in smaller writes
		case err != nil:
			return n
		}
	}
	return n
}
