package engine

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// nextRev derives a revision "<generation>-<hash>" from the head it
// replaces and the new content, so the same write on the same head gets
// the same rev and a rev says how many revisions precede it.
func nextRev(prev string, deleted bool, body []byte) string {
	gen := 0
	if g, _, ok := strings.Cut(prev, "-"); ok {
		gen, _ = strconv.Atoi(g)
	}
	h := sha256.New()
	h.Write([]byte(prev))
	if deleted {
		h.Write([]byte{0})
	} else {
		h.Write([]byte{1})
	}
	h.Write(body)
	var sum [32]byte
	return strconv.Itoa(gen+1) + "-" + hex.EncodeToString(h.Sum(sum[:0])[:16])
}

// mintID returns a new time-ordered id: 12 hex digits of milliseconds,
// then 10 random hex digits. Ids minted later sort later, so a scan by id
// is roughly by creation time.
func mintID(now time.Time) string {
	var b [8 + 5]byte
	binary.BigEndian.PutUint64(b[:8], uint64(now.UnixMilli()))
	_, _ = rand.Read(b[8:])
	return hex.EncodeToString(b[2:])
}
