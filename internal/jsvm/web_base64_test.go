package jsvm

import "testing"

func TestAtobBtoa(t *testing.T) {
	runWebCases(t, []webCase{
		{`[btoa(""), btoa("a"), btoa("ab"), btoa("abc"), btoa("\xff\xfe\x00"), btoa(undefined), btoa(null), btoa(123)]`, `["","YQ==","YWI=","YWJj","//4A","dW5kZWZpbmVk","bnVsbA==","MTIz"]`},
		{`err(() => btoa("é€"))`, `"throws Error InvalidCharacterError: Invalid character [5]"`},
		{`err(() => btoa())`, `"throws Error TypeError: The \"input\" argument must be specified [ERR_MISSING_ARGS]"`},
		{`[atob(""), atob("YQ"), atob("YQ=="), atob("YR=="), atob(" Y W I = "), atob("\tYWJj\n"), atob("/w=="), atob("+/+/")]`, `["","a","a","a","ab","abc","ÿ","ûÿ¿"]`},
		{`atob(null)`, `"ée"`},
		{`err(() => atob("a"))`, `"throws Error InvalidCharacterError: The string to be decoded is not correctly encoded. [5]"`},
		{`err(() => atob("YWI=="))`, `"throws Error InvalidCharacterError: Invalid character [5]"`},
		{`err(() => atob("YW=I"))`, `"throws Error InvalidCharacterError: Invalid character [5]"`},
		{`err(() => atob("YQ==="))`, `"throws Error InvalidCharacterError: Invalid character [5]"`},
		{`err(() => atob("Y\u00e9"))`, `"throws Error InvalidCharacterError: Invalid character [5]"`},
		{`err(() => atob("YQ-_"))`, `"throws Error InvalidCharacterError: Invalid character [5]"`},
		{`err(() => atob(undefined))`, `"throws Error InvalidCharacterError: The string to be decoded is not correctly encoded. [5]"`},
		{`err(() => atob())`, `"throws Error TypeError: The \"input\" argument must be specified [ERR_MISSING_ARGS]"`},
		{`(() => { try { atob("*") } catch (e) { return [e instanceof DOMException, e.code, e.name] } })()`, `[true,5,"InvalidCharacterError"]`},
		{`atob(btoa("\x00\x01\x80\xff hello"))`, `"\u0000\u0001ÿ hello"`},
	})
}
