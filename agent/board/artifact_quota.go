package board

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/protocol"
)

// What an artifact costs the store. The object store (nats.go's jetstream
// object.go) keeps an object as its data in chunks of objChunkBytes, each a
// message on $O.<bucket>.C.<nuid>, and one meta message on
// $O.<bucket>.M.<name, base64> with a rollup header and the object's info as
// JSON; the file store charges each message its subject, header and data
// and msgOverhead more (nats-server's fileStoreMsgSize). An empty artifact
// costs its meta message alone, about 400 bytes: an agent charged for data
// only could fill the store with empty ones. A put is charged the whole
// cost, and an agent keeps at most protocol.ArtifactQuotaObjects.
const (
	objChunkBytes  = 128 << 10 // nats.go's default chunk size, which Put uses
	objNUIDBytes   = 22
	msgOverhead    = 22 + 8 // nats-server's file store record: its header and hash
	objRollupHdr   = "NATS/1.0\r\nNats-Rollup: sub\r\n\r\n"
	objMetaPrefix  = "$O." + protocol.ArtifactBucket + ".M."
	objChunkPrefix = "$O." + protocol.ArtifactBucket + ".C."
)

// ArtifactCost is what the board charges an artifact stored as the object
// name (protocol.ArtifactObject), of size bytes, by agent by: what it
// costs the store, never below what the store counts
// (TestArtifactCostIsWhatTheStoreCounts).
func ArtifactCost(name, by string, size int) int {
	chunks := (size + objChunkBytes - 1) / objChunkBytes
	chunk := msgOverhead + len(objChunkPrefix) + objNUIDBytes
	// The info as Put marshals it, each field at its widest.
	info, _ := json.Marshal(jetstream.ObjectInfo{
		ObjectMeta: jetstream.ObjectMeta{Name: name, Metadata: map[string]string{metaBy: by}, Opts: &jetstream.ObjectMetaOptions{ChunkSize: objChunkBytes}},
		Bucket:     protocol.ArtifactBucket, NUID: strings.Repeat("N", objNUIDBytes), Size: 1<<63 - 1, ModTime: time.Time{},
		Chunks: 1<<32 - 1, Digest: "SHA-256=" + base64.URLEncoding.EncodeToString(make([]byte, 32)),
	})
	meta := msgOverhead + len(objMetaPrefix) + base64.URLEncoding.EncodedLen(len(name)) + len(objRollupHdr) + len(info)
	return size + chunks*chunk + meta
}

// artifactUse is what caller's artifacts cost the store, and how many it
// keeps, but the one named except (a put replacing it: its chunks are
// purged and its meta message rolled up).
func (s *Service) artifactUse(ctx context.Context, caller, except string) (cost, objects int, err error) {
	list, err := s.obj.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, refuse(protocol.BoardErrInternal, "artifact store: %v", err)
	}
	for _, o := range list {
		if o.Metadata[metaBy] == caller && o.Name != except {
			cost += ArtifactCost(o.Name, caller, int(o.Size))
			objects++
		}
	}
	return cost, objects, nil
}

// checkQuota refuses a put of size bytes as name that would take caller
// past its share of the store (protocol.ArtifactQuota of the flock's
// agents) or past its count of objects.
func (s *Service) checkQuota(ctx context.Context, caller, artifact, name string, size int) error {
	cost, objects, err := s.artifactUse(ctx, caller, name)
	if err != nil {
		return err
	}
	if objects >= protocol.ArtifactQuotaObjects {
		return refuse(protocol.BoardErrLimit, "artifact %s: %s keeps %d artifacts, its bound (complete its tasks' plans, which the operator removes, to make room)", artifact, caller, objects)
	}
	quota := protocol.ArtifactQuota(len(*s.agents.Load()))
	if n := ArtifactCost(name, caller, size); cost+n > quota {
		return refuse(protocol.BoardErrLimit, "artifact %s: %s's artifacts would cost the store %d bytes (%d for this one, its data and what the store keeps of it), over its share of %d", artifact, caller, cost+n, n, quota)
	}
	return nil
}

// purgeMarker removes what the store keeps of a deleted object (its meta
// message, marked deleted), so that a removed plan's artifacts leave
// nothing behind.
func (s *Service) purgeMarker(ctx context.Context, name string) error {
	st, err := s.js.Stream(ctx, protocol.ArtifactStream)
	if err != nil {
		return err
	}
	return st.Purge(ctx, jetstream.WithPurgeSubject(objMetaPrefix+base64.URLEncoding.EncodeToString([]byte(name))))
}
