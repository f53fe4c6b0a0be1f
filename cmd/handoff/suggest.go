package main

import "github.com/handoff-run/handoff/internal/suggest"

// closest is suggest.Closest, under the name the commands use.
func closest(s string, candidates []string) string { return suggest.Closest(s, candidates) }
