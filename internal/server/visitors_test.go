package server

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/auth"
	"github.com/handoff-run/handoff/internal/engine"
)

func cheapPasswords() { auth.SetPasswordCost(auth.PasswordParams{Memory: 64, Time: 1, Threads: 1}) }

func TestVisitorRoutes(t *testing.T) {
	t.Parallel()
	cheapPasswords()
	v := newEnv(t)
	const vis = "/v1/apps/alice/jobs/visitors"
	e := v.mustError(v.do("POST", vis+"/signup", "", `{"name":"sam","password":"long enough"}`), 403, "forbidden")
	if !strings.Contains(e.Message, "--signup open") {
		t.Fatalf("closed sign-up does not say how to open it: %s", e.Message)
	}
	v.mustError(v.do("PUT", "/v1/apps/alice/jobs/settings", "bob", `{"signup":"open"}`), 403, "forbidden")
	v.mustError(v.do("PUT", "/v1/apps/alice/jobs/settings", "alice", `{"signup":"wide"}`), 400, "invalid")
	var set map[string]any
	v.mustJSON(v.do("PUT", "/v1/apps/alice/jobs/settings", "alice", `{"signup":"invite"}`), 200, &set)
	if set["signup"] != "invite" {
		t.Fatalf("settings answer = %v", set)
	}
	var list struct{ Apps []engine.AppInfo }
	v.mustJSON(v.do("GET", "/v1/apps", "alice", ""), 200, &list)
	if apps := list.Apps; len(apps) != 2 || apps[0].App != "alice/jobs" || apps[0].Signup != "invite" || apps[1].Signup != "closed" {
		t.Fatalf("apps = %+v; want alice/jobs invite, alice/pub closed", list.Apps)
	}

	// Invites: the owner and editors make them, viewers do not.
	v.mustError(v.do("POST", "/v1/apps/alice/jobs/invites", "carol", ""), 403, "forbidden")
	var inv struct{ Code string }
	v.mustJSON(v.do("POST", "/v1/apps/alice/jobs/invites", "bob", ""), 201, &inv)
	v.mustError(v.do("POST", vis+"/signup", "", `{"name":"sam","password":"long enough"}`), 403, "forbidden")
	v.mustError(v.do("POST", vis+"/signup", "", `{"name":"sam","password":"short","invite":"`+inv.Code+`"}`), 400, "invalid")
	v.mustError(v.do("POST", vis+"/signup", "", `{"name":"sam","password":1}`), 400, "invalid")
	var up signedIn
	v.mustJSON(v.do("POST", vis+"/signup", "", `{"name":"sam","password":"long enough","invite":"`+inv.Code+`"}`), 201, &up)
	if up.Token == "" || up.User.ID != "sam@jobs--alice" {
		t.Fatalf("sign-up = %+v", up)
	}
	v.mustError(v.do("POST", vis+"/signup", "", `{"name":"kim","password":"long enough","invite":"`+inv.Code+`"}`), 403, "forbidden")

	// Sign-in: right, wrong, unknown.
	var in signedIn
	v.mustJSON(v.do("POST", vis+"/signin", "", `{"name":"sam","password":"long enough"}`), 200, &in)
	wrong := v.mustError(v.do("POST", vis+"/signin", "", `{"name":"sam","password":"long enougH"}`), 401, "unauthorized")
	unknown := v.mustError(v.do("POST", vis+"/signin", "", `{"name":"kim","password":"long enough"}`), 401, "unauthorized")
	if wrong.Message != unknown.Message || !strings.Contains(wrong.Message, "name or password is wrong") {
		t.Fatalf("wrong password %q, unknown name %q: want the same answer", wrong.Message, unknown.Message)
	}
	v.mustError(v.do("POST", "/v1/apps/alice/nope/visitors/signin", "", `{"name":"sam","password":"long enough"}`), 404, "not_found")

	// The token is the visitor's, scoped to the app.
	v.tokens["sam"], v.tokens["sam2"] = up.Token, in.Token
	var who struct{ User, App string }
	v.mustJSON(v.do("GET", "/v1/whoami", "sam", ""), 200, &who)
	if who.User != "sam@jobs--alice" || who.App != "alice/jobs" {
		t.Fatalf("whoami = %+v", who)
	}
	v.mustError(v.do("GET", "/v1/apps/alice/pub/dbs/d/docs", "sam", ""), 403, "forbidden")
	v.mustError(v.do("PUT", "/v1/apps/alice/pub/dbs/d/docs/x", "sam", `{}`), 403, "forbidden")
	v.mustError(v.do("POST", "/v1/apps", "sam", `{"app":"alice/more"}`), 403, "forbidden")
	v.mustError(v.do("GET", "/v1/users", "sam", ""), 403, "forbidden")
	v.mustError(v.do("POST", "/v1/apps/alice/jobs/invites", "sam", ""), 403, "forbidden")
	v.mustError(v.do("GET", "/v1/apps/alice/jobs/dbs/d/docs", "sam", ""), 403, "forbidden") // not a member yet
	v.mustJSON(v.do("POST", "/v1/apps/alice/jobs/members", "alice", `{"user":"sam@jobs--alice","role":"viewer"}`), 200, nil)
	v.mustJSON(v.do("GET", "/v1/apps/alice/jobs/dbs/d/docs", "sam", ""), 200, nil)

	// Sign-out ends the token sent, and only it.
	v.mustError(v.do("POST", vis+"/signout", "", ""), 401, "unauthorized")
	v.mustError(v.do("POST", "/v1/apps/alice/pub/visitors/signout", "sam", ""), 403, "forbidden")
	v.mustJSON(v.do("POST", vis+"/signout", "sam", ""), 200, nil)
	v.mustError(v.do("GET", "/v1/whoami", "sam", ""), 401, "unauthorized")
	v.mustJSON(v.do("GET", "/v1/whoami", "sam2", ""), 200, nil)

	// Passkeys need a signed-in visitor; a finish needs its ceremony.
	v.mustError(v.do("POST", vis+"/passkeys/register/begin", "", ""), 401, "unauthorized")
	v.mustError(v.do("POST", vis+"/passkeys/register/begin", "alice", ""), 400, "invalid")
	var c struct {
		Ceremony string
		Options  struct{ PublicKey map[string]any }
	}
	v.mustJSON(v.do("POST", vis+"/passkeys/register/begin", "sam2", ""), 200, &c)
	rp, _ := c.Options.PublicKey["rp"].(map[string]any)
	if c.Ceremony == "" || rp["id"] != "jobs--alice.localhost" {
		t.Fatalf("register begin = %+v; want the app's site as relying party", c)
	}
	v.mustError(v.do("POST", vis+"/passkeys/register/finish", "sam2", `{"ceremony":"x"}`), 400, "invalid")
	v.mustError(v.do("POST", vis+"/passkeys/register/finish", "sam2", `{"ceremony":"x","credential":{}}`), 400, "invalid")
	v.mustError(v.do("POST", vis+"/passkeys/register/finish", "sam2", `{"ceremony":"`+c.Ceremony+`","credential":{"id":"x"}}`), 401, "unauthorized")
	v.mustJSON(v.do("POST", vis+"/passkeys/signin/begin", "", ""), 200, &c)
	v.mustError(v.do("POST", vis+"/passkeys/signin/finish", "", `{"ceremony":"`+c.Ceremony+`","credential":{"id":"x"}}`), 401, "unauthorized")
	// A ceremony is single-use.
	v.mustError(v.do("POST", vis+"/passkeys/signin/finish", "", `{"ceremony":"`+c.Ceremony+`","credential":{"id":"x"}}`), 400, "invalid")
}

func (r *rateEnv) post(addr, path, body string) (int, string, string) {
	req := httptest.NewRequest("POST", path, strings.NewReader(body))
	req.RemoteAddr = addr
	w := httptest.NewRecorder()
	r.srv.ServeHTTP(w, req)
	return w.Code, w.Body.String(), w.Header().Get("Retry-After")
}

func TestVisitorSignInRateLimit(t *testing.T) {
	t.Parallel()
	cheapPasswords()
	r := newRateEnv(t)
	admin, _ := r.srv.e.Authenticate(context.Background(), adminToken)
	if err := r.srv.e.SetSignup(context.Background(), admin, "admin/pub", engine.SignupOpen); err != nil {
		t.Fatal(err)
	}
	const in = "/v1/apps/admin/pub/visitors/signin"
	const guesser = "203.0.113.7:1000"
	if code, body, _ := r.post(guesser, "/v1/apps/admin/pub/visitors/signup", `{"name":"sam","password":"long enough"}`); code != 201 {
		t.Fatalf("sign-up: %d %s", code, body)
	}
	for i := range authFailBurst {
		if code, body, _ := r.post(guesser, in, `{"name":"sam","password":"guess`+string(rune('a'+i))+`"}`); code != 401 {
			t.Fatalf("guess %d: %d %s", i, code, body)
		}
	}
	code, body, retry := r.post(guesser, in, `{"name":"sam","password":"long enough"}`)
	if code != 429 || !strings.Contains(body, `"rate_limited"`) || !strings.Contains(body, "retry in 6s") || retry != "6" {
		t.Fatalf("the right password past the limit: %d %s (Retry-After %q)", code, body, retry)
	}
	// The name is limited from every address, so spreading guesses over
	// addresses does not help; other names from other addresses pass.
	if code, _, _ := r.post("198.51.100.2:1", in, `{"name":"sam","password":"long enough"}`); code != 429 {
		t.Fatalf("the limited name from another address: %d", code)
	}
	if code, body, _ := r.post("198.51.100.2:1", "/v1/apps/admin/pub/visitors/signup", `{"name":"kim","password":"long enough"}`); code != 201 {
		t.Fatalf("another name from another address: %d %s", code, body)
	}
	// The window refills on the engine's clock.
	r.clk.Advance(authFailRefill)
	if code, body, _ := r.post("198.51.100.2:1", in, `{"name":"sam","password":"long enough"}`); code != 200 {
		t.Fatalf("after the wait: %d %s", code, body)
	}
	// That success cleared the name's count: a typo from a fresh address
	// is answered as a typo.
	if code, _, _ := r.post("192.0.2.5:1", in, `{"name":"sam","password":"typo typo"}`); code != 401 {
		t.Fatalf("one typo after a success: %d", code)
	}
	// The guesser's address refilled by one attempt only.
	if code, _, _ := r.post(guesser, in, `{"name":"kim","password":"guess"}`); code != 401 {
		t.Fatalf("one guess after the wait: %d", code)
	}
	if code, _, _ := r.post(guesser, in, `{"name":"kim","password":"long enough"}`); code != 429 {
		t.Fatalf("a second guess after the wait: %d", code)
	}
	r.clk.Advance(10 * time.Minute)
	if code, body, _ := r.post(guesser, in, `{"name":"kim","password":"long enough"}`); code != 200 {
		t.Fatalf("after a long wait: %d %s", code, body)
	}

	// Refused sign-ups count too: probing for taken names is limited.
	const prober = "192.0.2.77:1"
	for i := range authFailBurst {
		if code, body, _ := r.post(prober, "/v1/apps/admin/pub/visitors/signup", `{"name":"kim","password":"long enough"}`); code != 409 {
			t.Fatalf("sign-up %d as a taken name: %d %s", i, code, body)
		}
	}
	if code, body, _ := r.post(prober, "/v1/apps/admin/pub/visitors/signup", `{"name":"new-name","password":"long enough"}`); code != 429 {
		t.Fatalf("sign-up past the limit: %d %s", code, body)
	}
}

// TestAccessJSSeesTheVisitor: access.js gets a visitor as user, with the
// visitor id and no roles, and its grants can name that id.
func TestAccessJSSeesTheVisitor(t *testing.T) {
	t.Parallel()
	cheapPasswords()
	s := newStack(t, "")
	const app = "alice/notes"
	if _, err := s.e.CreateApp(s.ctx, consoleAdmin, app, false); err != nil {
		t.Fatal(err)
	}
	const accessJS = `export default function (doc, oldDoc, user, ctx) {
		if (!user || !user.id.endsWith("@notes--alice")) throw { forbidden: "visitors only" };
		if (doc.by !== user.id || user.roles.length !== 0) throw { forbidden: "saw " + JSON.stringify(user) };
		return { channels: ["own:" + user.id], grant: { users: { [user.id]: ["own:" + user.id] } } };
	}`
	if err := s.e.SetSignup(s.ctx, aliceCLI, app, engine.SignupOpen); err != nil {
		t.Fatal(err)
	}
	if err := s.e.SetAccessTimeout(s.ctx, consoleAdmin, app, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := s.e.Deploy(s.ctx, aliceCLI, app, accessJS, ""); err != nil {
		t.Fatal(err)
	}
	visitor := func(name string) engine.Actor {
		token, _, err := s.e.SignUp(s.ctx, app, name, "long enough", "")
		if err != nil {
			t.Fatal(err)
		}
		a, err := s.e.Authenticate(s.ctx, token)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	sam, kim := visitor("sam"), visitor("kim")
	s.putAs(sam, app, "notes", "n1", `{"by":"sam@notes--alice"}`, "")
	if _, err := s.e.Put(s.ctx, aliceCLI, app, "notes", "n2", []byte(`{"by":"alice"}`), appcode.PutOptions{}); !errs.Is(err, errs.Forbidden) {
		t.Fatalf("a server user's write: %v, want access.js's refusal", err)
	}
	if _, err := s.e.Get(s.ctx, sam, app, "notes", "n1"); err != nil {
		t.Fatalf("sam reads what the grant gives sam: %v", err)
	}
	if _, err := s.e.Get(s.ctx, kim, app, "notes", "n1"); err == nil {
		t.Fatal("kim read sam's note")
	}
}

// TestVisitorsReadWhatIsGrantedToPublic: on a private app, what access.js
// grants to public reaches the app's own visitors (as it reaches members),
// not other signed-in users; a visitor with nothing granted yet gets an
// empty answer, not a refusal.
func TestVisitorsReadWhatIsGrantedToPublic(t *testing.T) {
	t.Parallel()
	cheapPasswords()
	s := newStack(t, "")
	const app = "alice/board"
	if _, err := s.e.CreateApp(s.ctx, consoleAdmin, app, false); err != nil {
		t.Fatal(err)
	}
	if err := s.e.SetSignup(s.ctx, aliceCLI, app, engine.SignupOpen); err != nil {
		t.Fatal(err)
	}
	if err := s.e.SetAccessTimeout(s.ctx, consoleAdmin, app, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := s.e.Deploy(s.ctx, aliceCLI, app, `export default function (doc, oldDoc, user) {
		if (!user) throw { forbidden: "sign in" };
		return { channels: ["board"], grant: { public: ["board"] } };
	}`, ""); err != nil {
		t.Fatal(err)
	}
	token, _, err := s.e.SignUp(s.ctx, app, "sam", "long enough", "")
	if err != nil {
		t.Fatal(err)
	}
	sam, err := s.e.Authenticate(s.ctx, token)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := s.e.Query(s.ctx, sam, app, "cards", "kind", []byte(`"card"`), 0, ""); err != nil || len(p.Docs) != 0 {
		t.Fatalf("a visitor's query before anything is granted: %+v, %v; want an empty answer", p, err)
	}
	s.putAs(sam, app, "cards", "c1", `{"kind":"card"}`, "")
	if p, err := s.e.Query(s.ctx, sam, app, "cards", "kind", []byte(`"card"`), 0, ""); err != nil || len(p.Docs) != 1 {
		t.Fatalf("a visitor's query of a card granted to public: %+v, %v", p, err)
	}
	// bob is a server user, not a member of the app nor its visitor.
	bob := engine.Actor{User: "bob"}
	if _, err := s.e.AddUser(s.ctx, consoleAdmin, "bob"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.e.Get(s.ctx, bob, app, "cards", "c1"); !errs.Is(err, errs.Forbidden) {
		t.Fatalf("a server user who is not a member read the private app: %v", err)
	}
}
