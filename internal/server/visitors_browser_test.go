package server

import (
	"fmt"
	"strings"
	"testing"

	cdpwebauthn "github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"

	"github.com/handoff-run/handoff/internal/engine"
)

// visitorPage loads the visitor module the way an app's page does.
const visitorPage = `<!doctype html><title>board</title>
<script type="module">
import * as handoff from "/_handoff/client/visitor.js";
window.handoff = handoff;
</script>`

// TestVisitorSignsInOnTheAppsPage: in Chromium, on an app's own site, a
// visitor signs up, signs out and in with a password, adds a passkey
// (Chromium's virtual authenticator), signs in with it, and the token
// the page keeps works against the API until sign-out ends it.
func TestVisitorSignsInOnTheAppsPage(t *testing.T) {
	t.Parallel()
	cheapPasswords()
	s := newStack(t, "")
	const app = "alice/board"
	if _, err := s.e.CreateApp(s.ctx, consoleAdmin, app, false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.e.DeployCode(s.ctx, aliceCLI, app, engine.Code{Files: map[string][]byte{"index.html": []byte(visitorPage)}}); err != nil {
		t.Fatal(err)
	}
	if err := s.e.SetSignup(s.ctx, aliceCLI, app, engine.SignupOpen); err != nil {
		t.Fatal(err)
	}
	s.put(app, "tasks", "t1", `{"note":"for members"}`)
	port := s.ts.URL[strings.LastIndex(s.ts.URL, ":"):]

	b := newBrowser(t)
	b.open("http://board--alice.localhost" + port + "/")
	b.waitJS("the visitor module", "window.handoff !== undefined")
	b.virtualAuthenticator()

	// whoami is what the page's stored token is, as the API sees it.
	const whoami = `window.handoff.connect().whoami().then((w) => w.user + " " + w.app, (e) => e.code)`
	var got struct {
		Up, Who, Read, Refused, Out, In, Passkey, Keyed, KeyedRead, Stale string
	}
	b.eval(fmt.Sprintf(`(async () => {
		const h = window.handoff, r = {};
		const why = (p) => p.then((v) => v, (e) => e.code + ": " + e.message);
		r.up = (await h.signUp({ name: "sam", password: "long enough" })).id;
		r.who = await %[1]s;
		r.refused = await why(h.connect().app("alice/jobs").db("jobs").get("x"));
		return r;
	})()`, whoami), &got)
	// Another app is out of reach: CORS refuses the call before the
	// token's scope would, and the page is told so.
	if got.Up != "sam@board--alice" || got.Who != "sam@board--alice alice/board" || !strings.HasPrefix(got.Refused, "forbidden: ") || !strings.Contains(got.Refused, "handoff app set --app alice/jobs --origin") {
		t.Fatalf("after sign-up: %+v", got)
	}
	if err := s.e.AddMember(s.ctx, aliceCLI, app, "sam@board--alice", "viewer"); err != nil {
		t.Fatal(err)
	}
	b.eval(fmt.Sprintf(`(async () => {
		const h = window.handoff, r = {};
		const why = (p) => p.then((v) => v, (e) => e.code + ": " + e.message);
		r.read = (await h.connect().app("alice/board").db("tasks").get("t1")).note;
		await h.signOut();
		r.out = await %[1]s;
		r.in = (await h.signIn({ name: "sam", password: "long enough" })).id;
		await h.addPasskey();
		await h.signOut();
		r.passkey = (await h.signInWithPasskey()).id;
		r.keyed = await %[1]s;
		r.keyedRead = (await h.connect().app("alice/board").db("tasks").get("t1")).note;
		const token = h.visitorToken();
		await h.signOut();
		r.stale = await why(h.connect({ token }).whoami());
		return r;
	})()`, whoami), &got)
	want := "sam@board--alice"
	if got.Read != "for members" || got.Out != "unauthorized" || got.In != want ||
		got.Passkey != want || got.Keyed != want+" alice/board" || got.KeyedRead != "for members" || !strings.HasPrefix(got.Stale, "unauthorized") {
		t.Fatalf("the visitor's page: %+v", got)
	}
	// The passkey was stored for the visitor, with the site as relying party.
	if ps, err := s.e.Store().Passkeys(s.ctx, want); err != nil || len(ps) != 1 || !strings.Contains(string(ps[0].Data), `"publicKey"`) {
		t.Fatalf("stored passkeys = %+v, %v", ps, err)
	}
}

// virtualAuthenticator gives the browser a platform authenticator that
// holds passkeys and always verifies its user, as a phone or laptop
// would after a fingerprint.
func (b *browser) virtualAuthenticator() {
	b.t.Helper()
	t := b.t
	if _, err := chromedp.Call(b.ctx, cdpwebauthn.Enable, cdpwebauthn.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	_, err := chromedp.Call(b.ctx, cdpwebauthn.AddVirtualAuthenticator, cdpwebauthn.AddVirtualAuthenticatorParams{
		Options: &cdpwebauthn.VirtualAuthenticatorOptions{
			Protocol:                    cdpwebauthn.AuthenticatorProtocolCtap2,
			Transport:                   cdpwebauthn.AuthenticatorTransportInternal,
			HasResidentKey:              true,
			HasUserVerification:         true,
			IsUserVerified:              true,
			AutomaticPresenceSimulation: true,
		}})
	if err != nil {
		t.Fatal(err)
	}
}
