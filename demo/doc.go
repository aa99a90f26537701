// Package demo is `lifeboat demo`: the whole job, from a sandbox to its
// recovery, run on built-in defaults and the local provider in one
// directory (Run), each step reported with its time.
//
// Invariant: the demo keeps its repository, cache, state store and
// sandboxes in the directory it is given, and ends with an error unless every file and the browser session came
// back under the same workspace id on a new instance and generation.
package demo
