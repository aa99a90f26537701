// Package backendtest is the conformance suite for backend.Backend: Run
// checks every promise of the contract in backend.Backend's doc comment
// against a fresh, empty backend per subtest.
//
// Invariants: the suite only uses the Backend interface (plus the fault
// wrapper), never sleeps, and passes under -race; a backend that passes
// it may be used by the repository layer.
package backendtest
