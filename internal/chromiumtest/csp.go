package chromiumtest

// WatchCSP records, in every page loaded after it, each content security
// policy violation (a blocked inline script or style, an external asset);
// CSPViolations returns them.
func (b *Browser) WatchCSP() {
	b.t.Helper()
	b.Call("Page.enable", map[string]any{}, nil)
	b.Call("Page.addScriptToEvaluateOnNewDocument", map[string]any{"source": `
		window.__cspViolations = [];
		document.addEventListener("securitypolicyviolation", (e) => {
			window.__cspViolations.push(e.violatedDirective + " blocked " + (e.blockedURI || "inline") + " at " + e.sourceFile + ":" + e.lineNumber);
		});`}, nil)
}

// CSPViolations returns the violations the current page recorded since it
// loaded (WatchCSP must have been called before).
func (b *Browser) CSPViolations() []string {
	b.t.Helper()
	var v []string
	b.Eval(`window.__cspViolations || ["WatchCSP was not called before the page loaded"]`, &v)
	return v
}
