package auth

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/crypto/argon2"
)

// Passwords are stored as argon2id hashes in the usual encoded form,
// $argon2id$v=19$m=...,t=...,p=...$salt$key, so the parameters can be
// raised later without breaking the hashes made before.
//
// The parameters are the smallest of the OWASP recommendation: 19 MiB of
// memory, two passes, one lane.
var DefaultPasswordCost = PasswordParams{Memory: 19 * 1024, Time: 2, Threads: 1}

var cost atomic.Pointer[PasswordParams]

// SetPasswordCost changes the cost of new hashes; hashes made before keep
// theirs. Tests lower it so that many sign-ups take no time.
func SetPasswordCost(p PasswordParams) { cost.Store(&p) }

func passwordCost() PasswordParams {
	if p := cost.Load(); p != nil {
		return *p
	}
	return DefaultPasswordCost
}

const (
	saltBytes = 16
	keyBytes  = 32
)

// PasswordParams are argon2id's costs: memory in KiB, passes, lanes.
type PasswordParams struct {
	Memory  uint32
	Time    uint32
	Threads uint8
}

// hashSlots bounds the hashes computed at once: each takes a core and
// its memory for tens of milliseconds, so a flood of sign-ins waits here
// instead of starving every other request of CPU and memory. Past
// maxHashWaiters waiting, more are turned away with ErrBusy rather than
// piling up.
var (
	hashSlots   = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2))
	hashWaiters atomic.Int64
)

const maxHashWaiters = 256

// ErrBusy is returned when too many passwords are waiting to be hashed.
var ErrBusy = errors.New("auth: too many passwords are being checked; retry shortly")

func acquire(ctx context.Context) error {
	if hashWaiters.Add(1) > maxHashWaiters {
		hashWaiters.Add(-1)
		return ErrBusy
	}
	defer hashWaiters.Add(-1)
	select {
	case hashSlots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func release() { <-hashSlots }

// HashPassword returns the encoded argon2id hash of password with a new
// random salt. It waits for a free hashing slot, or for ctx.
func HashPassword(ctx context.Context, password string) (string, error) {
	var salt [saltBytes]byte
	if _, err := rand.Read(salt[:]); err != nil {
		return "", err
	}
	if err := acquire(ctx); err != nil {
		return "", err
	}
	defer release()
	p := passwordCost()
	key := argon2.IDKey([]byte(password), salt[:], p.Time, p.Memory, p.Threads, keyBytes)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, p.Memory, p.Time, p.Threads,
		b64.EncodeToString(salt[:]), b64.EncodeToString(key)), nil
}

// errBadHash is a stored hash that is not one HashPassword makes.
var errBadHash = errors.New("auth: the stored password hash is not an argon2id hash")

// CheckPassword reports whether password matches the encoded hash,
// comparing in constant time. An empty hash matches nothing but still
// costs a hash, so a caller that checks a missing user's password takes
// as long as for a real one.
func CheckPassword(ctx context.Context, password, encoded string) (bool, error) {
	missing := encoded == ""
	if missing {
		encoded = dummyHash()
	}
	p, salt, want, err := decodeHash(encoded)
	if err != nil {
		return false, err
	}
	if err := acquire(ctx); err != nil {
		return false, err
	}
	defer release()
	checks.Add(1)
	got := argon2.IDKey([]byte(password), salt, p.Time, p.Memory, p.Threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1 && !missing, nil
}

// checks counts the passwords checked since the process started.
var checks atomic.Int64

// PasswordChecks is how many passwords CheckPassword has compared with a
// hash: what a rate limit in front of it must keep small, and what its
// tests count.
func PasswordChecks() int64 { return checks.Load() }

// dummyHash is a hash no password is known for, checked in place of a
// missing one.
var dummyHash = sync.OnceValue(func() string {
	var b [saltBytes]byte
	_, _ = rand.Read(b[:])
	h, _ := HashPassword(context.Background(), base64.RawStdEncoding.EncodeToString(b[:]))
	return h
})

func decodeHash(s string) (p PasswordParams, salt, key []byte, err error) {
	parts := strings.Split(s, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return p, nil, nil, errBadHash
	}
	var v int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &v); err != nil || v != argon2.Version {
		return p, nil, nil, errBadHash
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &p.Memory, &p.Time, &p.Threads); err != nil || p.Time == 0 || p.Threads == 0 {
		return p, nil, nil, errBadHash
	}
	b64 := base64.RawStdEncoding
	if salt, err = b64.DecodeString(parts[4]); err != nil {
		return p, nil, nil, errBadHash
	}
	if key, err = b64.DecodeString(parts[5]); err != nil || len(key) == 0 {
		return p, nil, nil, errBadHash
	}
	return p, salt, key, nil
}
