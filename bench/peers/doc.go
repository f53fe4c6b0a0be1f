// Command peers runs other job queues on the job shape of `handoff bench
// jobs`, on the same stores, so their numbers can be set side by side
// with handoff's. It is a module of its own: the product never depends
// on what it measures against.
//
//	go run . river --store sqlite --mode river --jobs 5000
//	go run . compare --store sqlite --jobs 5000 --rounds 3
//
// "river" runs one round of River and prints its result as JSON;
// "compare" runs handoff and each River mode in turn, round after round,
// and prints each round's numbers and the ratios handoff/River.
package main
