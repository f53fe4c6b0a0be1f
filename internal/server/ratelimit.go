package server

import (
	"math"
	"net"
	"net/http"
	"net/netip"
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

// failLimiter counts failed credentials per client address.
type failLimiter struct {
	mu      sync.Mutex
	buckets map[string]*failBucket
}

type failBucket struct {
	tokens float64
	at     time.Time // when tokens was last brought up to date
}

// refill brings b up to date at now.
func (b *failBucket) refill(now time.Time) {
	if d := now.Sub(b.at); d > 0 {
		b.tokens = math.Min(authFailBurst, b.tokens+float64(d)/float64(authFailRefill))
		b.at = now
	}
}

// blocked reports how long the client at key must wait before its next
// credential is looked at; 0 means now.
func (l *failLimiter) blocked(key string, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		return 0
	}
	b.refill(now)
	if b.tokens >= 1 {
		return 0
	}
	return time.Duration((1 - b.tokens) * float64(authFailRefill))
}

// fail takes one token from the client at key.
func (l *failLimiter) fail(key string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buckets == nil {
		l.buckets = map[string]*failBucket{}
	}
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) >= authFailMaxClients {
			l.prune(now)
		}
		b = &failBucket{tokens: authFailBurst, at: now}
		l.buckets[key] = b
	}
	b.refill(now)
	b.tokens = math.Max(0, b.tokens-1)
}

// prune drops the buckets that are full again (they hold no memory of a
// failure), and arbitrary others if the table is still full.
func (l *failLimiter) prune(now time.Time) {
	for k, b := range l.buckets {
		b.refill(now)
		if b.tokens >= authFailBurst {
			delete(l.buckets, k)
		}
	}
	for k := range l.buckets {
		if len(l.buckets) < authFailMaxClients*3/4 {
			break
		}
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
