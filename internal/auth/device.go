// Package auth holds handoff's credentials that are more than a bearer
// token: device keys. A device (a CI runner, a script) holds an Ed25519
// private key that never leaves it; the server keeps only the public key.
// Each request carries a short-lived token signed with the key and bound
// to that one request, so nothing long-lived travels and a captured token
// cannot be replayed.
package auth

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// DevicePrefix starts the value of HANDOFF_DEVICE.
const DevicePrefix = "hdv1."

// SchemeDevice is the Authorization scheme of device-signed requests.
const SchemeDevice = "Device"

// TokenLifetime is how long a signed request token is accepted: long
// enough for clock skew, short enough that a leaked one is useless soon.
const TokenLifetime = 60 * time.Second

// DeviceKey is a device credential: who it acts for and its private key.
type DeviceKey struct {
	User    string
	Name    string
	Private ed25519.PrivateKey
}

// NewDeviceKey makes a fresh key pair for user's device name.
func NewDeviceKey(user, name string) (DeviceKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return DeviceKey{}, err
	}
	return DeviceKey{User: user, Name: name, Private: priv}, nil
}

// Public is the key the server registers.
func (k DeviceKey) Public() ed25519.PublicKey { return k.Private.Public().(ed25519.PublicKey) }

type encodedKey struct {
	User string `json:"u"`
	Name string `json:"n"`
	Seed string `json:"k"`
}

// Encode renders the credential as one string for HANDOFF_DEVICE. It is a
// secret: whoever holds it acts as the device until it is revoked.
func (k DeviceKey) Encode() string {
	b, _ := json.Marshal(encodedKey{User: k.User, Name: k.Name, Seed: base64.RawURLEncoding.EncodeToString(k.Private.Seed())})
	return DevicePrefix + base64.RawURLEncoding.EncodeToString(b)
}

// ParseDeviceKey reads a HANDOFF_DEVICE value.
func ParseDeviceKey(s string) (DeviceKey, error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(s), DevicePrefix)
	if !ok {
		return DeviceKey{}, fmt.Errorf("a device credential starts with %q; use the value `handoff device add` printed", DevicePrefix)
	}
	raw, err := base64.RawURLEncoding.DecodeString(rest)
	var ek encodedKey
	if err == nil {
		err = json.Unmarshal(raw, &ek)
	}
	seed, serr := base64.RawURLEncoding.DecodeString(ek.Seed)
	if err != nil || serr != nil || len(seed) != ed25519.SeedSize || ek.User == "" || ek.Name == "" {
		return DeviceKey{}, errors.New("the device credential is damaged; copy the whole value `handoff device add` printed")
	}
	return DeviceKey{User: ek.User, Name: ek.Name, Private: ed25519.NewKeyFromSeed(seed)}, nil
}

// claims is what a request token asserts, and what its signature covers.
type claims struct {
	User   string `json:"u"`
	Device string `json:"d"`
	Time   int64  `json:"t"` // unix seconds
	Nonce  string `json:"n"`
	Method string `json:"m"`
	Target string `json:"p"` // path and query
	Body   string `json:"b"` // hex sha256 of the body
}

// Sign returns the Authorization header value for one request.
func (k DeviceKey) Sign(method, target string, body []byte, now time.Time) string {
	var nonce [12]byte
	_, _ = rand.Read(nonce[:])
	c := claims{User: k.User, Device: k.Name, Time: now.Unix(), Nonce: hex.EncodeToString(nonce[:]),
		Method: method, Target: target, Body: bodyHash(body)}
	payload, _ := json.Marshal(c)
	sig := ed25519.Sign(k.Private, payload)
	return SchemeDevice + " " + base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func bodyHash(body []byte) string {
	h := sha256.Sum256(body)
	return hex.EncodeToString(h[:])
}

// Signed is a parsed, not yet verified, device request token.
type Signed struct {
	claims
	payload, sig []byte
}

// NonceKey identifies the token for replay checks.
func (s Signed) NonceKey() string { return s.User + "/" + s.Device + "/" + s.Nonce }

// Issued is when the device signed the token.
func (s Signed) Issued() time.Time { return time.Unix(s.Time, 0) }

// ParseSigned reads the credentials part of a "Device ..." header.
func ParseSigned(cred string) (Signed, error) {
	p, sg, ok := strings.Cut(cred, ".")
	bad := errors.New("the device token is malformed; sign requests with the handoff CLI or client")
	if !ok {
		return Signed{}, bad
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(p)
	sig, err2 := base64.RawURLEncoding.DecodeString(sg)
	var c claims
	if err1 != nil || err2 != nil || json.Unmarshal(payload, &c) != nil || c.User == "" || c.Device == "" || !validNonce(c.Nonce) {
		return Signed{}, bad
	}
	return Signed{claims: c, payload: payload, sig: sig}, nil
}

// validNonce: Sign makes hex nonces; the replay check stores them, so
// nothing else (NUL, say) gets that far.
func validNonce(n string) bool {
	if n == "" || len(n) > 64 {
		return false
	}
	for _, c := range n {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// Verify checks the signature against the registered public key, that the
// token is for this very request, and that it is fresh at now.
func (s Signed) Verify(pub ed25519.PublicKey, method, target string, body []byte, now time.Time) error {
	if err := s.VerifyRequest(pub, method, target, now); err != nil {
		return err
	}
	return s.VerifyBody(body)
}

// VerifyRequest is Verify but for the body: the signature, the method and
// target, the age. Only the device's key makes a token that passes it, so
// a server may trust the signer this far while the body is still on its
// way (to give it more time); it must check the body with VerifyBody.
func (s Signed) VerifyRequest(pub ed25519.PublicKey, method, target string, now time.Time) error {
	if len(pub) != ed25519.PublicKeySize || !ed25519.Verify(pub, s.payload, s.sig) {
		return errors.New("the device signature does not verify; the credential may have been replaced: add the device again")
	}
	if s.Method != method || s.Target != target {
		return errSignedForAnother
	}
	age := now.Sub(s.Issued())
	if age > TokenLifetime || age < -TokenLifetime {
		return fmt.Errorf("the device token is %v old (limit %v); check the device's clock", age.Round(time.Second), TokenLifetime)
	}
	return nil
}

// VerifyBody checks that body is the one the token was signed for.
func (s Signed) VerifyBody(body []byte) error {
	if s.Body != bodyHash(body) {
		return errSignedForAnother
	}
	return nil
}

var errSignedForAnother = errors.New("the device token was signed for another request; sign each request anew")
