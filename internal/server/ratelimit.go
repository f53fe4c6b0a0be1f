package server

import (
	"cmp"
	"maps"
	"math"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// Failed sign-ins are limited per client address with a token bucket: a
// client may get authFailBurst credentials wrong at once, then one more
// every authFailRefill. While its bucket is empty, every request it sends
// with a credential is answered rate_limited before the credential is
// even checked, so a guesser cannot tell a good guess from a bad one
// either. Anonymous requests carry nothing to guess and pass; so do a
// revoked device's, which are refused as revoked and not counted.
const (
	authFailBurst  = 10
	authFailRefill = time.Minute / authFailBurst
	// authFailMaxClients bounds the table; past it, the buckets that have
	// refilled are dropped, then arbitrary ones.
	authFailMaxClients = 1 << 16
)

// failLimiter counts attempts per key in token buckets: burst at once,
// then one more every refill (zero values: authFailBurst and
// authFailRefill). Keys are of bounded size (an address, a hash), and
// the table holds at most authFailMaxClients of them.
type failLimiter struct {
	burst  float64
	refill time.Duration

	mu      sync.Mutex
	buckets map[string]*failBucket
}

type failBucket struct {
	tokens float64
	at     time.Time // when tokens was last brought up to date
}

func (l *failLimiter) limits() (float64, time.Duration) {
	if l.burst == 0 {
		return authFailBurst, authFailRefill
	}
	return l.burst, l.refill
}

// bucket returns key's bucket brought up to date at now, made full when
// new. l.mu is held, and room was made (makeRoom).
func (l *failLimiter) bucket(key string, now time.Time) *failBucket {
	burst, refill := l.limits()
	if l.buckets == nil {
		l.buckets = map[string]*failBucket{}
	}
	b := l.buckets[key]
	if b == nil {
		b = &failBucket{tokens: burst, at: now}
		l.buckets[key] = b
	}
	if d := now.Sub(b.at); d > 0 {
		b.tokens = math.Min(burst, b.tokens+float64(d)/float64(refill))
		b.at = now
	}
	return b
}

// makeRoom prunes the table when n more buckets could overfill it.
// l.mu is held.
func (l *failLimiter) makeRoom(now time.Time, n int) {
	if len(l.buckets)+n > authFailMaxClients {
		l.prune(now)
	}
}

// wait is how long b's holder waits for its next token; 0 means now.
func (l *failLimiter) wait(b *failBucket) time.Duration {
	if b.tokens >= 1 {
		return 0
	}
	_, refill := l.limits()
	return time.Duration((1 - b.tokens) * float64(refill))
}

// blocked reports how long the client at key must wait before its next
// credential is looked at; 0 means now.
func (l *failLimiter) blocked(key string, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buckets[key] == nil {
		return 0
	}
	return l.wait(l.bucket(key, now))
}

// fail takes one token from the client at key.
func (l *failLimiter) fail(key string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.makeRoom(now, 1)
	b := l.bucket(key, now)
	b.tokens = math.Max(0, b.tokens-1)
}

// take takes one token from the bucket of each key, all or none, before
// the attempt they limit is made: so a burst of attempts sent at once
// gets no more through than the buckets hold. It returns 0, or how long
// to wait and the index of the key that is out of tokens. An attempt that
// turns out to be no guess gives its tokens back (refund).
func (l *failLimiter) take(now time.Time, keys ...string) (time.Duration, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.makeRoom(now, len(keys))
	var longest time.Duration
	who := -1
	bs := make([]*failBucket, len(keys))
	for i, k := range keys {
		bs[i] = l.bucket(k, now)
		if d := l.wait(bs[i]); d > longest {
			longest, who = d, i
		}
	}
	if who >= 0 {
		return longest, who
	}
	for _, b := range bs {
		b.tokens--
	}
	return 0, -1
}

// refund gives back a token taken for an attempt that was no guess.
func (l *failLimiter) refund(now time.Time, keys ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	burst, _ := l.limits()
	for _, k := range keys {
		if b := l.buckets[k]; b != nil {
			b = l.bucket(k, now)
			b.tokens = math.Min(burst, b.tokens+1)
		}
	}
}

// prune drops the buckets that are full again (they hold no memory of a
// failure), then, if the table is still too full, those nearest to full:
// the buckets that remember the most failures are the last to go, so a
// flood of new keys cannot cheaply wipe out the count of a name under
// attack.
func (l *failLimiter) prune(now time.Time) {
	burst, refill := l.limits()
	level := func(b *failBucket) float64 { return b.tokens + float64(now.Sub(b.at))/float64(refill) }
	for k, b := range l.buckets {
		if level(b) >= burst {
			delete(l.buckets, k)
		}
	}
	keep := authFailMaxClients * 3 / 4
	if len(l.buckets) < keep {
		return
	}
	keys := slices.Collect(maps.Keys(l.buckets))
	slices.SortFunc(keys, func(a, b string) int { return cmp.Compare(level(l.buckets[b]), level(l.buckets[a])) })
	for _, k := range keys[:len(keys)-keep+1] {
		delete(l.buckets, k)
	}
}

// clientKey is the address a request is limited under: the peer's IP
// address from the connection, an IPv6 address by its /64 (one host
// usually holds a whole /64). X-Forwarded-For and similar headers are not
// trusted: any client can send them, so honouring them would let a
// guesser claim a fresh address for every attempt, or lock out someone
// else's. Behind a reverse proxy every client shares the proxy's address.
func clientKey(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// reset forgets the failures counted under key.
func (l *failLimiter) reset(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.buckets, key)
}
