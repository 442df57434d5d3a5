// Package busenv carries the bus's rendered files (the NATS server config and
// the JetStream topology) through environment variables on Fargate, where the
// bus has no host directory to read them from. The aws stack stores each file
// in AWS Secrets Manager and ECS injects it through the container's `secrets`;
// the bus binary calls Materialize at start.
//
// Encoding: gzip, then standard base64, then split into parts of at most
// MaxPart characters (a Secrets Manager secret holds 64 KiB). For a file
// prefix P (ConfigPrefix, TopologyPrefix) the container sees
//
//	P_PARTS=<n>                plain environment: how many parts
//	P_PART_1 … P_PART_<n>      from Secrets Manager, concatenated in order
//
// The package has no Pulumi or AWS dependency so the bus binary can import it.
package busenv

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
)

// Prefixes of the two files' variables.
const (
	ConfigPrefix   = "FLOCK_BUS_CONFIG"
	TopologyPrefix = "FLOCK_BUS_TOPOLOGY"
)

// Dir is where the bus materializes the files on Fargate: its ephemeral /run volume.
const Dir = "/run/flock-bus"

// MaxPart is the longest part (characters), under Secrets Manager's 65,536-byte limit.
const MaxPart = 60000

// maxDecoded bounds what Decode inflates (a corrupt or hostile value must not exhaust memory).
const maxDecoded = 64 << 20

// PartsVar names the variable holding the part count.
func PartsVar(prefix string) string { return prefix + "_PARTS" }

// PartVar names the i-th part (1-based).
func PartVar(prefix string, i int) string { return prefix + "_PART_" + strconv.Itoa(i) }

// Encode returns the parts that carry data. The output is deterministic, so
// unchanged files give unchanged secrets (no churn in pulumi preview).
func Encode(data []byte) ([]string, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(data); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	s := base64.StdEncoding.EncodeToString(buf.Bytes())
	var parts []string
	for len(s) > MaxPart {
		parts = append(parts, s[:MaxPart])
		s = s[MaxPart:]
	}
	return append(parts, s), nil
}

// Decode reassembles the file carried under prefix. ok is false when
// P_PARTS is unset (the bus then reads its files from their usual paths).
func Decode(prefix string, getenv func(string) string) (data []byte, ok bool, err error) {
	raw := getenv(PartsVar(prefix))
	if raw == "" {
		return nil, false, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 || n > 1000 {
		return nil, true, fmt.Errorf("%s: must be a part count between 1 and 1000 (got %q)", PartsVar(prefix), raw)
	}
	var b64 bytes.Buffer
	for i := 1; i <= n; i++ {
		p := getenv(PartVar(prefix, i))
		if p == "" {
			return nil, true, fmt.Errorf("%s is empty or unset (%s says %d parts)", PartVar(prefix, i), PartsVar(prefix), n)
		}
		b64.WriteString(p)
	}
	gz, err := base64.StdEncoding.DecodeString(b64.String())
	if err != nil {
		return nil, true, fmt.Errorf("%s: not base64: %w", prefix, err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, true, fmt.Errorf("%s: not gzip: %w", prefix, err)
	}
	data, err = io.ReadAll(io.LimitReader(zr, maxDecoded+1))
	if err != nil {
		return nil, true, fmt.Errorf("%s: %w", prefix, err)
	}
	if len(data) > maxDecoded {
		return nil, true, fmt.Errorf("%s: decodes to more than %d bytes", prefix, maxDecoded)
	}
	return data, true, nil
}

// Materialize writes the config and topology carried in the environment to
// dir (created 0700, files 0600, replaced by rename) and returns their paths.
// ok is false when the environment carries neither (the Docker target).
func Materialize(dir string, getenv func(string) string) (configFile, topologyFile string, ok bool, err error) {
	conf, okc, err := Decode(ConfigPrefix, getenv)
	if err != nil {
		return "", "", true, err
	}
	topo, okt, err := Decode(TopologyPrefix, getenv)
	if err != nil {
		return "", "", true, err
	}
	if !okc && !okt {
		return "", "", false, nil
	}
	if okc != okt {
		return "", "", true, fmt.Errorf("the environment carries only one of %s and %s", PartsVar(ConfigPrefix), PartsVar(TopologyPrefix))
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", true, err
	}
	configFile, topologyFile = filepath.Join(dir, "nats.conf"), filepath.Join(dir, "topology.json")
	for _, f := range []struct {
		path string
		data []byte
	}{{configFile, conf}, {topologyFile, topo}} {
		tmp := f.path + ".new"
		if err := os.WriteFile(tmp, f.data, 0o600); err != nil {
			return "", "", true, err
		}
		if err := os.Rename(tmp, f.path); err != nil {
			return "", "", true, err
		}
	}
	return configFile, topologyFile, true, nil
}
