// Package npmcompat holds no code, only a test: popular npm packages,
// installed with npm into an app's node_modules/, bundled by
// internal/appdir and run by the app's backend on the real engine
// (internal/jstest), must give the same answers as Node does. Each
// package's check lives in testdata/<package>/check.js.
//
// The test needs npm, node and the npm registry (or a warm npm cache);
// without them it skips and says what is missing.
package npmcompat
