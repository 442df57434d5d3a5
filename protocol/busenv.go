package protocol

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"io"
	"strconv"
)

// On Fargate the bus has no host directory to read its rendered files (the
// NATS server config, the JetStream topology) from: the aws stack stores each
// in AWS Secrets Manager, ECS injects it through the container's `secrets`,
// and the bus writes them out at start (bus.Materialize).
//
// Encoding: gzip, then standard base64, then split into parts of at most
// EnvMaxPart characters (a Secrets Manager secret holds 64 KiB). For a file
// prefix P (EnvBusConfig, EnvBusTopology) the container sees
//
//	P_PARTS=<n>                plain environment: how many parts
//	P_PART_1 … P_PART_<n>      from Secrets Manager, concatenated in order

// Prefixes of the two files' variables.
const (
	EnvBusConfig   = "FLOCK_BUS_CONFIG"
	EnvBusTopology = "FLOCK_BUS_TOPOLOGY"
)

// EnvMaxPart is the longest part (characters), under Secrets Manager's 65,536-byte limit.
const EnvMaxPart = 60000

// envMaxDecoded bounds what DecodeEnv inflates (a corrupt or hostile value must not exhaust memory).
const envMaxDecoded = 64 << 20

// EnvPartsVar names the variable holding the part count.
func EnvPartsVar(prefix string) string { return prefix + "_PARTS" }

// EnvPartVar names the i-th part (1-based).
func EnvPartVar(prefix string, i int) string { return prefix + "_PART_" + strconv.Itoa(i) }

// EncodeEnv returns the parts that carry data. The output is deterministic, so
// unchanged files give unchanged secrets (no churn in pulumi preview).
func EncodeEnv(data []byte) ([]string, error) {
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
	for len(s) > EnvMaxPart {
		parts = append(parts, s[:EnvMaxPart])
		s = s[EnvMaxPart:]
	}
	return append(parts, s), nil
}

// DecodeEnv reassembles the file carried under prefix. ok is false when
// P_PARTS is unset (the bus then reads its files from their usual paths).
func DecodeEnv(prefix string, getenv func(string) string) (data []byte, ok bool, err error) {
	raw := getenv(EnvPartsVar(prefix))
	if raw == "" {
		return nil, false, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 || n > 1000 {
		return nil, true, fmt.Errorf("%s: must be a part count between 1 and 1000 (got %q)", EnvPartsVar(prefix), raw)
	}
	var b64 bytes.Buffer
	for i := 1; i <= n; i++ {
		p := getenv(EnvPartVar(prefix, i))
		if p == "" {
			return nil, true, fmt.Errorf("%s is empty or unset (%s says %d parts)", EnvPartVar(prefix, i), EnvPartsVar(prefix), n)
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
	data, err = io.ReadAll(io.LimitReader(zr, envMaxDecoded+1))
	if err != nil {
		return nil, true, fmt.Errorf("%s: %w", prefix, err)
	}
	if len(data) > envMaxDecoded {
		return nil, true, fmt.Errorf("%s: decodes to more than %d bytes", prefix, envMaxDecoded)
	}
	return data, true, nil
}
