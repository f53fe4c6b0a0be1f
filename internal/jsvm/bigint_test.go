package jsvm

import (
	_ "embed"
	"strings"
	"testing"
	"time"
)

//go:embed testdata/bigint_semantics.js
var bigIntSemantics string

// nodeBigIntAnswers is Node's output for testdata/bigint_semantics.js
// (node --input-type=module, then JSON.stringify(cases())).
const nodeBigIntAnswers = `["3n","42n","18446744073709551616n","-9223372036854775808n","2n","-1n","8n","-4n","0n","-1n","0n","0n","12","1024","NaN","-2147483648","-4","0","12","6","0","TypeError","RangeError","TypeError","TypeError","true","true","true","true","false","true","false","false","true","true","true","true","true","true","false","true","false","true","false","true","6n","true","true","\"done\"","27n","108n","54n","800","3072n","TypeError","TypeError","\"10n,18n\"","10n","31n","12n","SyntaxError","RangeError","TypeError","1n","TypeError","-9223372036854775808n","18446744073709551615n","5n","-5n","RangeError","TypeError","\"BigInt,1,asIntN,2\"","true","true","\"bigint\"","\"-5,-9223372036854775808\"","-1n","\"3ewfdnca0n6ld1ggvfgg\"","TypeError","\"12\"","12n","81n","a b c d e key get rhs set 42"]`

// TestBigIntKeepsNodesAnswers: with its operators turned into checked
// calls, code that names BigInt answers as Node does, down to the order
// in which operands are converted and compound assignments read and
// write.
func TestBigIntKeepsNodesAnswers(t *testing.T) {
	p := newTestPool(t, "backend.js", bigIntSemantics, Options{})
	if got := mustJSON(t, p, "cases"); got != nodeBigIntAnswers {
		t.Fatalf("differs from Node%s\nnode:    %s\nhandoff: %s", firstDiffAt(nodeBigIntAnswers, got), nodeBigIntAnswers, got)
	}
}

// TestBigIntKeepsMoreOfNodesAnswers: eval of code with nothing to check
// keeps eval's own scoping, the builtins' property flags are the
// standard's, a Symbol on the left throws before the right is read, and a
// compound assignment to a property of a primitive hands the primitive to
// its accessors and fails as strict or sloppy code does.
func TestBigIntKeepsMoreOfNodesAnswers(t *testing.T) {
	p := newTestPool(t, "backend.js", bigIntSemantics, Options{})
	if got, want := mustJSON(t, p, "more"), `["1","2","true","true,false,true","true,false,true","false,false,true","true,false,true","TypeError","number","TypeError","2","TypeError","2","true","6","undefined","9","16","[\"bigint\"]"]`; got != want {
		t.Fatalf("differs from Node\nnode:    %s\nhandoff: %s", want, got)
	}
}

func firstDiffAt(a, b string) string {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return " at: " + a[max(0, i-40):min(len(a), i+40)]
		}
	}
	return ""
}

const bigIntBombs = `
const outcome = (f) => { try { const v = f(); return "ran: " + (typeof v === "bigint" ? v.toString(16).length + " hex digits" : String(v)) } catch (e) { return e.name } };
export function bombs() {
  const o = { v: 2n, w: 1n };
  const big = 2n ** 1000000n;
  return [
    outcome(() => 2n ** 10n ** 11n),
    outcome(() => 1n << 10n ** 10n),
    outcome(() => 1n >> -(10n ** 10n)),
    outcome(() => 7n << 2n ** 70n),
    outcome(() => 7n >> 2n ** 70n),
    outcome(() => { let x = 3n; for (;;) x *= x }),
    outcome(() => { let x = 3n; for (;;) x = x * x }),
    outcome(() => big * big),
    outcome(() => big ** 2n),
    outcome(() => { o.v **= 10n ** 11n }),
    outcome(() => { o["w"] <<= 10n ** 10n }),
    outcome(() => BigInt.asUintN(2 ** 40, -1n)),
    outcome(() => BigInt.asIntN(2 ** 40, big)),
    outcome(() => BigInt("9".repeat(1e6))),
    outcome(() => BigInt.asUintN(64, "9".repeat(1e6))),
    outcome(() => 1n < "9".repeat(1e6)),
    outcome(() => 1n == "9".repeat(1e6)),
    outcome(() => ({ valueOf: () => 1n }) >= "9".repeat(1e6)),
    outcome(() => eval("2n ** 10n ** 11n")),
    outcome(() => new Function("a", "return a << 10n ** 10n")(1n)),
    outcome(() => globalThis["%mul"](2n, 3n)),
    outcome(() => globalThis["%put"]({}, 1n, 0)),
    outcome(() => big),
  ];
}
`

// TestBigIntBombsFailTheirCall: each operation whose result would pass
// MaxBigIntBits, or that would parse a string too long to parse quickly,
// throws a RangeError in its call: 2n ** 10n ** 11n asked math/big for
// 12 GB in one step, which ends the process.
func TestBigIntBombsFailTheirCall(t *testing.T) {
	p := newTestPool(t, "backend.js", bigIntBombs, Options{Deadline: 30 * time.Second})
	start := time.Now()
	got := mustJSON(t, p, "bombs")
	want := "[" + strings.Join([]string{
		`"RangeError"`, `"RangeError"`, `"RangeError"`, `"RangeError"`, `"ran: 1 hex digits"`,
		`"RangeError"`, `"RangeError"`, `"RangeError"`, `"RangeError"`, `"RangeError"`, `"RangeError"`,
		`"RangeError"`, `"ran: 250001 hex digits"`, `"RangeError"`, `"RangeError"`, `"RangeError"`, `"RangeError"`, `"RangeError"`,
		`"RangeError"`, `"RangeError"`, `"ran: 1 hex digits"`, `"TypeError"`, `"ran: 250001 hex digits"`,
	}, ",") + "]"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	t.Logf("all bombs in %v", time.Since(start))
}

// TestBigIntOnlyWhereNamed: a module that never names BigInt has none,
// even by a computed name, so its operators need no checks.
func TestBigIntOnlyWhereNamed(t *testing.T) {
	p := newTestPool(t, "backend.js", `
const n = (s) => s.split("").reverse().join("");
export function gone() {
  return [typeof globalThis[n("tnIgiB")], typeof globalThis[n("yarrA46tnIgiB")], typeof DataView.prototype[n("46tnIgiBteg")],
    (() => { try { return eval("1n") } catch (e) { return e.name } })()]
}`, Options{})
	if got, want := mustJSON(t, p, "gone"), `["undefined","undefined","undefined","SyntaxError"]`; got != want {
		t.Fatalf("got %s want %s", got, want)
	}
	for src, want := range map[string]bool{
		"export const f = () => 1 * 2":                    false,
		"export const f = () => BigInt(1)":                true,
		"export const f = () => 1n":                       true,
		"export const f = (d) => d.getBigInt64(0)":        true,
		"export const f = () => globalThis['BigInt']":     true,
		"export const f = (x) => typeof x === 'bigint'":   false,
		"export const f = () => 'an' // 10n in a comment": false,
	} {
		prog, err := Compile("backend.js", src)
		if err != nil {
			t.Fatal(err)
		}
		if prog.bigint != want {
			t.Errorf("%s: uses BigInt = %v, want %v", src, prog.bigint, want)
		}
	}
}
