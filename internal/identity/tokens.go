package identity

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
)

// AdminUser is the name of the user created on first start.
const AdminUser = "admin"

// tokenPrefix marks handoff tokens so a leaked one is easy to recognise
// in logs and by secret scanners.
const tokenPrefix = "hnd_"

// NewToken returns a random bearer token.
func NewToken() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// HashToken is how tokens are stored: never in clear. Tokens are long
// random strings, so a fast hash is enough (no dictionary to guess from).
func HashToken(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}
